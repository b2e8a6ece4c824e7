"""cuda_library: compiles .cu files with nvcc (sm_80 and sm_90 SASS plus compute_90 PTX) into a cc_library.

ptxas warns when a kernel spills registers to local memory (-warn-spills): a spill in these small kernels
would mean a slow path nobody meant to write. //tests/trainer:fatbin_test checks the architectures.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

_GENCODE = " ".join([
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
])

def cuda_library(name, srcs, hdrs = [], deps = [], **kwargs):
    """A cc_library whose objects come from nvcc.

    Args:
      name: target name.
      srcs: .cu files. Each may include headers from `hdrs` relative to the workspace root.
      hdrs: headers, exported to dependents and visible to nvcc.
      deps: cc deps of the resulting library (@local_cuda//:headers is always added; the binary links the
        CUDA runtime, or a test a fake one).
      **kwargs: passed to cc_library.
    """
    if not CUDA_ENABLED:
        fail("cuda_library({}) needs CUDA; guard the call with CUDA_ENABLED".format(name))
    objs = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".pic.o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = ("{nvcc} -std=c++17 -O3 -Xcompiler -fPIC -Xptxas -warn-spills {gencode} -I. -I$(GENDIR) " +
                   "-c $(location {src}) -o $@").format(nvcc = NVCC, gencode = _GENCODE, src = src),
            message = "nvcc " + src,
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:headers"],
        alwayslink = True,
        **kwargs
    )
