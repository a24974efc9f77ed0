package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kiln-ml/kiln/internal/modelfetch"
)

// runFetch is `kiln fetch --uri URI --dest DIR`, the init container of InferenceServices.
func runFetch(args []string) error {
	fs := flag.NewFlagSet("kiln fetch", flag.ContinueOnError)
	uri := fs.String("uri", "", "model URI: http(s)://, s3://bucket/key or gs://bucket/key")
	dest := fs.String("dest", "/mnt/models", "folder to download into")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after this long")
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
	path, err := modelfetch.Fetch(ctx, http.DefaultClient, *uri, os.Getenv("AWS_ENDPOINT_URL"), *dest)
	if err != nil {
		return err
	}
	fmt.Println("fetched", *uri, "to", path)
	return nil
}
