"""cc_grpc_proto: protobuf and gRPC C++ code from Debian's protoc and grpc_cpp_plugin, as one cc_library."""

def cc_grpc_proto(name, src, deps = [], **kwargs):
    """Generates <base>.pb.{h,cc} and <base>.grpc.pb.{h,cc} from `src` and wraps them in a cc_library.

    Includes are workspace-relative: a file proto/ps.proto is included as "proto/ps.pb.h".
    """
    base = src[:-len(".proto")]
    pkg = native.package_name()
    outs = [base + ext for ext in [".pb.h", ".pb.cc", ".grpc.pb.h", ".grpc.pb.cc"]]
    native.genrule(
        name = name + "_gen",
        srcs = [src],
        outs = outs,
        cmd = ("protoc --proto_path=. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) {pkg}/{src}").format(pkg = pkg, src = src),
        message = "protoc " + src,
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc", base + ".grpc.pb.cc"],
        hdrs = [base + ".pb.h", base + ".grpc.pb.h"],
        deps = deps + ["//third_party:grpc"],
        **kwargs
    )

def cc_proto(name, src, deps = [], **kwargs):
    """Generates <base>.pb.{h,cc} (messages only, no gRPC service) from `src` and wraps them in a cc_library."""
    base = src[:-len(".proto")]
    pkg = native.package_name()
    outs = [base + ".pb.h", base + ".pb.cc"]
    native.genrule(
        name = name + "_gen",
        srcs = [src],
        outs = outs,
        cmd = "protoc --proto_path=. --cpp_out=$(GENDIR) {pkg}/{src}".format(pkg = pkg, src = src),
        message = "protoc " + src,
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc"],
        hdrs = [base + ".pb.h"],
        deps = deps + ["//third_party:protobuf"],
        **kwargs
    )
