# kiln's image: a static binary on a distroless base. Build it where a container engine runs
# (`docker build -t kiln .`); this project's own machines have none.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /kiln ./cmd/kiln

FROM gcr.io/distroless/static:nonroot
COPY --from=build /kiln /kiln
USER 65532:65532
ENTRYPOINT ["/kiln"]
CMD ["manager"]
