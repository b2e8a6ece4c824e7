"""Repository rule that finds the local CUDA toolkit and, separately, NCCL.

Generates @local_cuda with:
  defs.bzl:  CUDA_ENABLED, NCCL_ENABLED (bools), NVCC (absolute path or "")
  BUILD:     :headers  CUDA runtime and cuBLAS headers only (for code whose CUDA calls a test replaces)
             :cudart   :headers plus libcudart          :cublas  libcublas
             :nccl_headers  nccl.h only       :nccl  nccl.h and libnccl (both empty without NCCL)
             :cuda     everything found (rpaths set, so binaries run where they were built)
CUDA needs nvcc, the runtime and cuBLAS under $CUDA_PATH (default /usr/local/cuda); without them the build
is CPU-only. NCCL is looked for on its own, because package installs and NVIDIA's containers put it in
/usr/include and /usr/lib/<multiarch> (x86_64- or aarch64-linux-gnu) rather than under the CUDA root: $NCCL_HOME, $NCCL_ROOT, the CUDA
root, then /usr. Without NCCL the CUDA trainer is still built and the ring uses TCP.
The rule prints what it found (a DEBUG line in the build output, whenever it re-runs).
"""

def _first_nccl(rctx, cuda_root):
    """Returns (include_dir, lib_dir) of the first NCCL found, or None, and the places tried."""
    candidates = []
    for var in ["NCCL_HOME", "NCCL_ROOT"]:
        home = rctx.os.environ.get(var, "")
        if home:
            candidates.append((var, home + "/include", [home + "/lib", home + "/lib64"]))
    candidates.append(("CUDA root", cuda_root + "/include", [cuda_root + "/lib64", cuda_root + "/lib"]))
    # Debian/Ubuntu's multiarch folder of this machine (aarch64 on a GH200 node), then the generic ones.
    # (This Bazel's repository_ctx has no os.arch: ask uname.)
    machine = rctx.execute(["uname", "-m"]).stdout.strip()
    triple = {"aarch64": "aarch64-linux-gnu", "ppc64le": "powerpc64le-linux-gnu"}.get(machine, "x86_64-linux-gnu")
    candidates.append(("system", "/usr/include", ["/usr/lib/" + triple, "/usr/lib64", "/usr/lib"]))
    tried = []
    for origin, include, libs in candidates:
        for lib in libs:
            tried.append(lib)
            if rctx.path(include + "/nccl.h").exists and _has_lib(rctx, lib, "nccl"):
                return struct(include = include, lib = lib, origin = origin), tried
    return None, tried

def _has_lib(rctx, lib_dir, name):
    # Distributions often ship only the versioned name (libnccl.so.2) without the -dev symlink.
    return rctx.path("{}/lib{}.so".format(lib_dir, name)).exists or \
           rctx.path("{}/lib{}.so.2".format(lib_dir, name)).exists

def _version(rctx, header, macros):
    """Reads `#define MACRO value` lines from a header: "major.minor.patch" or "unknown"."""
    if not rctx.path(header).exists:
        return "unknown"
    values = {}
    for line in rctx.read(header).splitlines():
        parts = [p for p in line.replace("\t", " ").split(" ") if p]
        if len(parts) >= 3 and parts[0] == "#define" and parts[1] in macros:
            values[parts[1]] = parts[2]
    if len(values) != len(macros):
        return "unknown"
    return ".".join([values[m] for m in macros])

def _link_name(rctx, lib_dir, name):
    # -l:libnccl.so.2 links a library that has no unversioned symlink.
    if rctx.path("{}/lib{}.so".format(lib_dir, name)).exists:
        return "-l" + name
    return "-l:lib{}.so.2".format(name)

def _cuda_configure_impl(rctx):
    root = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    needed = [
        root + "/bin/nvcc",
        root + "/include/cuda_runtime.h",
        root + "/include/cublas_v2.h",
        root + "/lib64/libcudart.so",
        root + "/lib64/libcublas.so",
    ]
    missing = [p for p in needed if not rctx.path(p).exists]
    if rctx.os.environ.get("PSRING_DISABLE_CUDA", "") == "1":
        missing = ["(disabled by PSRING_DISABLE_CUDA=1)"]
    cuda_enabled = len(missing) == 0
    disabled_nccl = rctx.os.environ.get("PSRING_DISABLE_NCCL", "") == "1"
    nccl, tried = _first_nccl(rctx, root) if cuda_enabled and not disabled_nccl else (None, [])

    if not cuda_enabled:
        summary = "psring: CUDA off (missing: {}); building the CPU path only".format(", ".join(missing))
    else:
        cuda_version = _version(rctx, root + "/include/cuda_runtime_api.h", ["CUDART_VERSION"])
        summary = "psring: CUDA on: {} (CUDART_VERSION {}); ".format(root, cuda_version)
        if nccl:
            summary += "NCCL {} from {} ({}, {}); NCCL transport built".format(
                _version(rctx, nccl.include + "/nccl.h", ["NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"]),
                nccl.origin,
                nccl.include,
                nccl.lib,
            )
        elif disabled_nccl:
            summary += "NCCL disabled by PSRING_DISABLE_NCCL=1: CUDA trainer built, ring transport TCP only"
        else:
            summary += ("NCCL not found (looked in $NCCL_HOME, $NCCL_ROOT, {}): CUDA trainer built, " +
                        "ring transport TCP only").format(", ".join(tried))
    print(summary)

    build = ["package(default_visibility = [\"//visibility:public\"])\n"]
    if cuda_enabled:
        rctx.symlink(root + "/include", "include")
        lib = root + "/lib64"
        build.append("""
cc_library(
    name = "headers",
    hdrs = glob(["include/*.h", "include/crt/*.h", "include/crt/*.hpp", "include/*.hpp"],
                exclude = ["include/nccl*.h"]),
    includes = ["include"],
)

cc_library(
    name = "cudart",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcudart"],
    deps = [":headers"],
)

cc_library(
    name = "cublas",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcublas"],
    deps = [":headers"],
)
""".format(lib = lib))
    if nccl:
        # Its own include folder, so /usr/include never becomes an include path of the build.
        rctx.symlink(nccl.include + "/nccl.h", "nccl_include/nccl.h")
        build.append("""
cc_library(
    name = "nccl_headers",
    hdrs = ["nccl_include/nccl.h"],
    includes = ["nccl_include"],
    deps = [":headers"],
)

cc_library(
    name = "nccl",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "{link}"],
    deps = [":cudart", ":nccl_headers"],
)
""".format(lib = nccl.lib, link = _link_name(rctx, nccl.lib, "nccl")))
    else:
        build.append("\ncc_library(name = \"nccl_headers\")\n\ncc_library(name = \"nccl\")\n")
    build.append("\ncc_library(\n    name = \"cuda\",\n    deps = {},\n)\n".format(
        [":cudart", ":cublas", ":nccl"] if cuda_enabled else [],
    ))
    rctx.file("BUILD.bazel", "".join(build))
    rctx.file("defs.bzl", "CUDA_ENABLED = {}\nNCCL_ENABLED = {}\nNVCC = \"{}\"\n".format(
        cuda_enabled,
        nccl != None,
        root + "/bin/nvcc" if cuda_enabled else "",
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "NCCL_HOME", "NCCL_ROOT", "PSRING_DISABLE_CUDA", "PSRING_DISABLE_NCCL"],
    local = True,
    configure = True,
)
