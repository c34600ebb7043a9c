# Bundles the dashboard's page into the binary at build time (nothing is
# fetched at run time): each asset becomes a raw string literal.
#   cmake -DASSETS=DIR -DOUT=FILE -P embed_assets.cmake
set(_out "// Generated from host/dashboard/assets by embed_assets.cmake. Do not edit.\n#pragma once\n\nnamespace areal::host::dashboard {\n\n")
foreach(_pair "index.html;kIndexHtml" "dashboard.js;kDashboardJs" "dashboard.css;kDashboardCss")
  list(GET _pair 0 _file)
  list(GET _pair 1 _name)
  file(READ "${ASSETS}/${_file}" _text)
  string(FIND "${_text}" ")areal_asset\"" _clash)
  if(NOT _clash EQUAL -1)
    message(FATAL_ERROR "${_file} contains the raw-string delimiter )areal_asset\"")
  endif()
  string(APPEND _out "inline constexpr const char ${_name}[] = R\"areal_asset(${_text})areal_asset\";\n\n")
endforeach()
string(APPEND _out "}  // namespace areal::host::dashboard\n")
file(WRITE "${OUT}.tmp" "${_out}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
