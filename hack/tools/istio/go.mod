module github.com/kiln-ml/kiln/hack/tools/istio

go 1.26.0

require istio.io/api v1.32.0

require (
	github.com/golang/protobuf v1.5.4 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20251213004720-97cd9d5aeac2 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
