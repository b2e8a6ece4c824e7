"""Repository rule that finds the local CUDA toolkit.

Generates @local_cuda with:
  defs.bzl:  CUDA_ENABLED (bool), NVCC (absolute path or "")
  BUILD:     :cuda  cc_library with the CUDA runtime, cuBLAS and NCCL headers and libraries (rpath set)
Without nvcc, cuBLAS or NCCL the build is CPU-only: CUDA_ENABLED = False and :cuda is empty.
"""

def _cuda_configure_impl(rctx):
    root = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    needed = [
        root + "/bin/nvcc",
        root + "/include/cuda_runtime.h",
        root + "/include/cublas_v2.h",
        root + "/include/nccl.h",
        root + "/lib64/libcudart.so",
        root + "/lib64/libcublas.so",
        root + "/lib64/libnccl.so",
    ]
    missing = [p for p in needed if not rctx.path(p).exists]
    if rctx.os.environ.get("PSRING_DISABLE_CUDA", "") == "1":
        missing = ["(disabled by PSRING_DISABLE_CUDA=1)"]
    enabled = len(missing) == 0
    if enabled:
        rctx.symlink(root + "/include", "include")
        rctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda",
    hdrs = glob(["include/*.h", "include/crt/*.h", "include/crt/*.hpp", "include/*.hpp"]),
    includes = ["include"],
    linkopts = [
        "-L{lib}",
        "-Wl,-rpath,{lib}",
        "-lcublas",
        "-lnccl",
        "-lcudart",
    ],
)
""".format(lib = root + "/lib64"))
        rctx.file("defs.bzl", "CUDA_ENABLED = True\nNVCC = \"{}\"\n".format(root + "/bin/nvcc"))
    else:
        print("psring: CUDA is off (missing: {}); building the CPU path only.".format(", ".join(missing)))
        rctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda")
""")
        rctx.file("defs.bzl", "CUDA_ENABLED = False\nNVCC = \"\"\n")

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "PSRING_DISABLE_CUDA"],
    local = True,
)
