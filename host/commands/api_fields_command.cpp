// `areal-host api-fields`: the gateway's compatibility policy as Markdown
// tables (docs/http-api.md embeds them; a test keeps the two equal).
#include <iostream>

#include "plugins/gateway/proxy/api_fields.hpp"
#include "commands.hpp"

namespace areal::host {

int api_fields(const CommandLine&) {
  std::cout << proxy::api_fields_markdown();
  return 0;
}

}  // namespace areal::host
