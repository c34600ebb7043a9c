# The libtorch the torch plugins build against, as one interface target
# (areal_torch) so every torch translation unit gets the same flags.
#
# Any libtorch >= 1.13: Debian's CPU build by default, any other through
# Torch_DIR or CMAKE_PREFIX_PATH (scripts/setup.sh points them at the
# libtorch inside an installed PyTorch with CUDA; docs/gpu.md).
#   AREAL_TORCH_CUDA  the libtorch has CUDA (c10_cuda): device memory statistics
#   AREAL_TORCH_NCCL  ... and NCCL headers were found: NCCL process groups for fsdp
#   AREAL_TORCH_GLOO  Gloo's headers were found: Gloo process groups (CPU ranks)
if(NOT Torch_FOUND)
  return()
endif()
if(Torch_VERSION AND Torch_VERSION VERSION_LESS 1.13)
  message(FATAL_ERROR "libtorch ${Torch_VERSION} at ${Torch_DIR} is too old: areal needs libtorch >= 1.13")
endif()
# The rest of areal (and Debian's libraries) use the C++11 std::string ABI;
# a libtorch built with the old one (older PyTorch wheels) cannot link with it.
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  message(FATAL_ERROR "libtorch at ${Torch_DIR} uses the pre-C++11 std::string ABI (_GLIBCXX_USE_CXX11_ABI=0), which cannot link "
                      "with areal's other libraries: use a PyTorch built with the C++11 ABI (torch.compiled_with_cxx11_abi() is True) "
                      "or Debian's libtorch (AREAL_TORCH=debian scripts/setup.sh)")
endif()
# TorchConfig finds c10 with find_library, which looks in the system's
# folders before the libtorch's own: on a machine with Debian's libtorch-dev
# (scripts/setup.sh installs it) another libtorch's targets got Debian's
# libc10 as well, two c10s in one process (a module linking it aborted at
# load). The libtorch's own libc10 replaces any other.
if(c10_LIBRARY AND TORCH_INSTALL_PREFIX)
  get_filename_component(_areal_torch_prefix "${TORCH_INSTALL_PREFIX}" REALPATH)
  get_filename_component(_areal_c10 "${c10_LIBRARY}" REALPATH)
  string(FIND "${_areal_c10}" "${_areal_torch_prefix}/" _areal_c10_at)
  if(NOT _areal_c10_at EQUAL 0)
    unset(AREAL_TORCH_C10_LIBRARY CACHE)  # another libtorch's, when this build folder is configured again
    find_library(AREAL_TORCH_C10_LIBRARY c10 PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
    if(NOT AREAL_TORCH_C10_LIBRARY)
      message(FATAL_ERROR "libtorch at ${Torch_DIR}: no libc10 in ${TORCH_INSTALL_PREFIX}/lib (find_library found ${c10_LIBRARY})")
    endif()
    set(_areal_torch_libraries "")
    foreach(_areal_lib IN LISTS TORCH_LIBRARIES)
      if(_areal_lib STREQUAL c10_LIBRARY)
        set(_areal_lib "${AREAL_TORCH_C10_LIBRARY}")
      endif()
      list(APPEND _areal_torch_libraries "${_areal_lib}")
    endforeach()
    set(TORCH_LIBRARIES "${_areal_torch_libraries}")
  endif()
endif()
add_library(areal_torch INTERFACE)
# PyTorch 2.11's libtorch.so exports its own copy of std::filesystem, built
# against GCC 13's libstdc++: in a program that lists libtorch before
# libstdc++ that copy answers the program's own calls, and on GCC 12's
# libstdc++ (Debian 12) fs::remove_all jumped to a null weak symbol. Naming
# libstdc++ first makes the loader find the system's copy first.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
  target_link_libraries(areal_torch INTERFACE stdc++)
endif()
target_link_libraries(areal_torch INTERFACE ${TORCH_LIBRARIES})
# PyTorch's headers need C++20 from 2.12 on; older ones compile as C++17.
if(Torch_VERSION AND Torch_VERSION VERSION_GREATER_EQUAL 2.12)
  target_compile_features(areal_torch INTERFACE cxx_std_20)
endif()
# c10d's Gloo header needs Gloo's own headers, which Debian ships (libgloo-dev)
# and PyTorch's wheels do not: without them fsdp ranks talk over NCCL only.
# Only beside the libtorch's own headers (Debian's are in /usr/include, as its
# libgloo-dev's): another Gloo's headers would not match its Gloo.
find_path(AREAL_GLOO_INCLUDE_DIR gloo/algorithm.h PATHS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
if(AREAL_GLOO_INCLUDE_DIR)
  target_compile_definitions(areal_torch INTERFACE AREAL_TORCH_GLOO=1)
  target_include_directories(areal_torch SYSTEM INTERFACE ${AREAL_GLOO_INCLUDE_DIR})
endif()
set(AREAL_TORCH_HAS_CUDA OFF)
if(C10_CUDA_LIBRARY)
  set(AREAL_TORCH_HAS_CUDA ON)
  target_compile_definitions(areal_torch INTERFACE AREAL_TORCH_CUDA=1)
  # NCCL's header: the CUDA toolkit's, the system's, or the nvidia-nccl wheel next to PyTorch's.
  get_filename_component(_areal_site_packages "${Torch_DIR}/../../../.." ABSOLUTE)
  find_path(AREAL_NCCL_INCLUDE_DIR nccl.h
            HINTS "${_areal_site_packages}/nvidia/nccl/include" ENV NCCL_INCLUDE_DIR /usr/local/cuda/include /usr/include)
  if(AREAL_NCCL_INCLUDE_DIR)
    target_compile_definitions(areal_torch INTERFACE AREAL_TORCH_NCCL=1)
    target_include_directories(areal_torch SYSTEM INTERFACE ${AREAL_NCCL_INCLUDE_DIR})
  endif()
endif()
# areal's own CUDA kernels (plugins/torch_model/cuda_kernels) need nvcc too:
# AUTO builds them when a CUDA libtorch and nvcc are found (CUDACXX or
# CMAKE_CUDA_COMPILER name one off PATH), ON requires them, OFF leaves them
# out (the engine then runs libtorch's kernels only). Real architectures
# 8.0 (A100) and 9.0 (H100/H200), and 9.0's PTX for newer cards to compile.
set(AREAL_CUDA_KERNELS AUTO CACHE STRING "areal's own CUDA kernels: AUTO, ON or OFF")
set(AREAL_CUDA_ARCHITECTURES "80-real;90" CACHE STRING "CUDA architectures of areal's own kernels")
set(AREAL_HAS_CUDA_KERNELS OFF)
if(AREAL_TORCH_HAS_CUDA AND NOT AREAL_CUDA_KERNELS STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    set(AREAL_HAS_CUDA_KERNELS ON)
    # PyTorch's CMake package appends its own -gencode list to CMAKE_CUDA_FLAGS
    # (the GPUs it detects, or without one a list from its build that a newer
    # nvcc may refuse: CUDA 13's has no sm_50). Our kernels are built for
    # AREAL_CUDA_ARCHITECTURES alone.
    string(REGEX REPLACE "-gencode[ =]arch=[^ ]+" "" CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS}")
  endif()
endif()
if(AREAL_CUDA_KERNELS STREQUAL "ON" AND NOT AREAL_HAS_CUDA_KERNELS)
  message(FATAL_ERROR "AREAL_CUDA_KERNELS=ON needs a CUDA libtorch and nvcc (set CUDACXX to nvcc's path)")
endif()
set(_areal_nccl "none")
set(_areal_gloo "none")
if(AREAL_NCCL_INCLUDE_DIR)
  set(_areal_nccl "${AREAL_NCCL_INCLUDE_DIR}")
endif()
if(AREAL_GLOO_INCLUDE_DIR)
  set(_areal_gloo "${AREAL_GLOO_INCLUDE_DIR}")
endif()
string(CONCAT _areal_torch_summary "libtorch ${Torch_VERSION} at ${Torch_DIR}: CUDA ${AREAL_TORCH_HAS_CUDA}, NCCL headers ${_areal_nccl}, "
              "Gloo headers ${_areal_gloo}, areal's CUDA kernels ${AREAL_HAS_CUDA_KERNELS}")
message(STATUS "${_areal_torch_summary}")
# The same line for scripts that measure a build (scripts/gpu_check.sh).
file(WRITE "${CMAKE_BINARY_DIR}/areal_torch.txt" "${_areal_torch_summary}\n")
