package version

// BuildFlags are the flags of every build of kiln's binaries, beside CGO_ENABLED=0: `make build`
// (GO_BUILD), the Dockerfile, the tests' builds (testenv.Build) and the release's kubectl-kiln.
// test/build checks that the Makefile and the Dockerfile give them.
//   - -trimpath: no path of the building machine in the binary.
//   - -tags=grpcnotrace: gRPC without golang.org/x/net/trace, whose debug pages render with
//     html/template. That executor looks methods up by name at run time, so the linker would
//     keep every exported method of every type: kiln's file is a fifth larger with it and
//     kiln-fetch's two fifths, and most of a file is resident (docs/decisions.md, 22).
var BuildFlags = []string{"-trimpath", "-tags=grpcnotrace"}
