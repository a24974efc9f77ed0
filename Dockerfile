# kiln's image: a static binary on a distroless base. Build it where a container engine runs:
#   docker build --build-arg VERSION=$(bash hack/version.sh) --build-arg COMMIT=$(git rev-parse HEAD) -t ghcr.io/kiln-ml/kiln:$(bash hack/version.sh) .
# this project's own machines have none.
FROM golang:1.26 AS build
ARG VERSION
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum VERSION ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
# The flags of internal/version.GoBuild.
RUN v=${VERSION:-$(cat VERSION)} && CGO_ENABLED=0 go build -trimpath -tags=grpcnotrace \
    -ldflags="-s -w -X github.com/kiln-ml/kiln/internal/version.Version=$v -X github.com/kiln-ml/kiln/internal/version.Commit=$COMMIT" \
    -o /kiln ./cmd/kiln && CGO_ENABLED=0 go build -trimpath -tags=grpcnotrace -ldflags="-s -w" -o /kiln-fetch ./cmd/kiln-fetch

FROM gcr.io/distroless/static:nonroot
COPY --from=build /kiln /kiln
COPY --from=build /kiln-fetch /kiln-fetch
USER 65532:65532
ENTRYPOINT ["/kiln"]
CMD ["manager"]
