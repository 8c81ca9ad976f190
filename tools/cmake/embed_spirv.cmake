# Compiles fixed GLSL compute shaders with glslc at build time and embeds them as uint32 arrays.
# kiln_embed_spirv(<target> <out_dir> <shader.comp>...) writes <out_dir>/<name>.spv.inc (the words as
# "0x07230203,...", glslc -mfmt=num) and creates custom target <target> that builds them; make the
# consuming library depend on it. Sources #including an .inc rebuild through their depfiles.
function(kiln_embed_spirv target out_dir)
  find_program(KILN_GLSLC glslc)
  if(NOT KILN_GLSLC)
    message(FATAL_ERROR "glslc not found: install the glslc package (shaderc) to build the Vulkan backend")
  endif()
  set(outputs)
  foreach(shader ${ARGN})
    get_filename_component(name ${shader} NAME_WE)
    set(out ${out_dir}/${name}.spv.inc)
    add_custom_command(
      OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out_dir}
      COMMAND ${KILN_GLSLC} --target-env=vulkan1.2 -fshader-stage=compute -O -mfmt=num
              -o ${out} ${shader}
      DEPENDS ${shader}
      COMMENT "glslc ${name}.comp"
      VERBATIM)
    list(APPEND outputs ${out})
  endforeach()
  add_custom_target(${target} DEPENDS ${outputs})
endfunction()
