// Command kubectl-kiln is kiln's kubectl plugin, `kubectl kiln`: every kiln kind in one table,
// why a job waits, logs across replicas, a PyJob from a local script.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kiln-ml/kiln/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cli.New("kubectl kiln", cli.Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).ExecuteContext(ctx)
	stop()
	os.Exit(cli.Report(os.Stderr, err))
}
