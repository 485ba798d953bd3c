# SPDX-License-Identifier: MIT
# The HTML report's page assets (src/report/assets) are compiled into the library as
# string arrays in generated/report_assets.h; the example snapshot is generated at build time
# into examples/train_leak.pickle of the build tree.
set(GM_REPORT_ASSETS
  ${PROJECT_SOURCE_DIR}/src/report/assets/report.css
  ${PROJECT_SOURCE_DIR}/src/report/assets/body.html
  ${PROJECT_SOURCE_DIR}/src/report/assets/report.js)
set(GM_REPORT_ASSETS_H ${PROJECT_BINARY_DIR}/generated/report_assets.h)
add_custom_command(
  OUTPUT ${GM_REPORT_ASSETS_H}
  COMMAND ${CMAKE_COMMAND} -DOUT=${GM_REPORT_ASSETS_H}
          "-DNAMES=gm_report_css\;gm_report_body\;gm_report_js"
          "-DFILES=${PROJECT_SOURCE_DIR}/src/report/assets/report.css\;${PROJECT_SOURCE_DIR}/src/report/assets/body.html\;${PROJECT_SOURCE_DIR}/src/report/assets/report.js"
          -P ${PROJECT_SOURCE_DIR}/cmake/scripts/embed.cmake
  DEPENDS ${GM_REPORT_ASSETS} ${PROJECT_SOURCE_DIR}/cmake/scripts/embed.cmake
  COMMENT "Embedding the HTML report assets")
add_custom_target(gm_report_assets DEPENDS ${GM_REPORT_ASSETS_H})
add_dependencies(gpumem_obj gm_report_assets)
set_source_files_properties(${PROJECT_SOURCE_DIR}/src/report/html.c
  PROPERTIES OBJECT_DEPENDS ${GM_REPORT_ASSETS_H})
