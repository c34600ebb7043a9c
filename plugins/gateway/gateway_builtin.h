/* Entry point of the built-in gateway, registered by areal-host's main. */
#ifndef AREAL_GATEWAY_BUILTIN_H_
#define AREAL_GATEWAY_BUILTIN_H_

#include "areal/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

areal_status* areal_builtin_gateway_init(const areal_host_api* host, const areal_plugin_info** out_info);

#ifdef __cplusplus
}
#endif

#endif
