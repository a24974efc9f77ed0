// Command kiln-fetch puts an InferenceService's model into a folder before its server starts: the
// init container of InferenceServices whose model is not on a claim (see internal/modelfetch). It
// is a binary of its own, in kiln's image beside /kiln, so that the storage SDKs it links, and the
// memory they take at start, stay out of the manager (measured: docs/performance.md, Measurements
// behind the code).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kiln-ml/kiln/internal/modelfetch"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kiln-fetch:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("kiln-fetch", flag.ContinueOnError)
	uri := fs.String("uri", os.Getenv("KILN_MODEL_URI"), "model URI: http(s)://, s3://bucket/key, gs://bucket/key, azblob://container/key (or a prefix), hf://org/model[@revision]; default $KILN_MODEL_URI, which keeps a pre-signed URL's signature out of the process list")
	dest := fs.String("dest", "/mnt/models", "folder to download into, its own: a failed fetch empties it")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after this long")
	maxBytes := fs.Int64("max-bytes", 0, "stop when the model grows past this many bytes (0: no limit)")
	digest := fs.String("sha256", "", "the hex sha256 a single-object model must have")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *uri == "" {
		return fmt.Errorf("--uri (or KILN_MODEL_URI) is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	what, err := modelfetch.Fetch(ctx, *uri, *dest, modelfetch.Options{MaxBytes: *maxBytes, SHA256: *digest})
	if err != nil {
		return err
	}
	fmt.Println("fetched", modelfetch.Redact(*uri), "into", *dest+":", what)
	return nil
}
