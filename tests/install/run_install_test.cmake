# Installs the built project into a scratch prefix, then configures, builds and runs
# tests/install/consumer against it with find_package(neuralcost CONFIG).
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/consumer" -B "${WORK_DIR}/build"
                        -G Ninja "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed")
endif()
execute_process(COMMAND "${WORK_DIR}/build/consumer" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer's analysis disagreed with the reference document")
endif()

# The installed tree stands alone: the worker package is installed beside the library, the
# hardware database is embedded (no data files), and the library holds no path of the source
# tree's Python environment.
set(prefix "${WORK_DIR}/prefix")
file(GLOB_RECURSE libraries "${prefix}/*/libneuralcost.so")
list(LENGTH libraries found)
if(NOT found EQUAL 1)
  message(FATAL_ERROR "expected one installed libneuralcost.so, found: ${libraries}")
endif()
get_filename_component(libdir "${libraries}" DIRECTORY)
if(NOT EXISTS "${libdir}/neuralcost/python/neuralcost_worker/__main__.py" OR
   NOT EXISTS "${libdir}/neuralcost/python/neuralcost_worker/torch/reference.py")
  message(FATAL_ERROR "the worker package was not installed in ${libdir}/neuralcost/python")
endif()
file(GLOB_RECURSE caches "${libdir}/neuralcost/python/*.pyc")
if(caches)
  message(FATAL_ERROR "Python caches were installed: ${caches}")
endif()
if(EXISTS "${prefix}/share/neuralcost/hardware")
  message(FATAL_ERROR "data/hardware was installed, but the library embeds it and never reads it")
endif()
file(STRINGS "${libraries}" baked REGEX "${SOURCE_DIR}/(\\.venv|python)")
if(baked)
  message(FATAL_ERROR "the installed library names the source tree's Python: ${baked}")
endif()

# the installed tool without an environment: the worker backends say why they cannot run
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=NEURALCOST_PYTHON --unset=NEURALCOST_WORKER_DIR
                        PATH=${WORK_DIR}/no-such-dir "${prefix}/bin/neural-cost" backends --format json
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc OR NOT out MATCHES "\"unavailable_reason\": \"no Python environment: \\$NEURALCOST_PYTHON is unset, [^\"]*/neuralcost/python-env/bin/python3 does not exist")
  message(FATAL_ERROR "without Python the installed tool should say so (rc ${rc}):\n${out}${err}")
endif()
# ...and with one, it runs the installed worker package (not the source tree's python/)
if(EXISTS "${SOURCE_DIR}/.venv/bin/python3")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=NEURALCOST_WORKER_DIR
                          "NEURALCOST_PYTHON=${SOURCE_DIR}/.venv/bin/python3" "NEURALCOST_CACHE_DIR=${WORK_DIR}/cache"
                          "${prefix}/bin/neural-cost" profile --model ff --backend torch --mode eager --format json
                          --budget 0.1 --warmup 1 --warmup-seconds 0 --layer-runs 2 --target-ci 0.5
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  string(FIND "${out}" "PYTHONPATH=${libdir}/neuralcost/python)" at)
  if(rc OR at EQUAL -1)
    message(FATAL_ERROR "the installed tool did not run its installed worker (rc ${rc}):\n${err}\n${out}")
  endif()
  # ...and times its ops with the installed per-op timer (built against that environment's torch)
  if(EXISTS "${libdir}/neuralcost/torch-timer/libneuralcost_torch_timer.so")
    string(FIND "${out}" "(compiled observer ${libdir}/neuralcost/torch-timer/libneuralcost_torch_timer.so)" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "the installed torch worker did not time its ops with the installed timer:\n${out}")
    endif()
  endif()
endif()
