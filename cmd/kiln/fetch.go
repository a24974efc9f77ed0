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

// runFetch is `kiln fetch --uri URI --dest DIR`, the init container of InferenceServices.
func runFetch(args []string) error {
	fs := flag.NewFlagSet("kiln fetch", flag.ContinueOnError)
	uri := fs.String("uri", "", "model URI: http(s)://, s3://bucket/key (or a prefix) or gs://bucket/key")
	dest := fs.String("dest", "/mnt/models", "folder to download into")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after this long")
	maxBytes := fs.Int64("max-bytes", 0, "stop when the model grows past this many bytes (0: no limit)")
	digest := fs.String("sha256", "", "the hex sha256 a single-object model must have")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *uri == "" {
		return fmt.Errorf("--uri is required")
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
