package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// runWaitFor is `kiln wait-for HOST...`, the PyTorch workers' init container: it returns once
// every host's DNS name resolves (the master's headless Service publishes its pod), trying
// --tries times --interval apart, as Kubeflow's nslookup loop does, without a shell image.
func runWaitFor(args []string) error {
	fs := flag.NewFlagSet("kiln wait-for", flag.ContinueOnError)
	tries := fs.Int("tries", 100, "lookups per host before giving up")
	interval := fs.Duration("interval", 2*time.Second, "time between lookups")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("name at least one host to wait for")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, host := range fs.Args() {
		if err := waitForHost(ctx, net.DefaultResolver, host, *tries, *interval); err != nil {
			return err
		}
	}
	return nil
}

func waitForHost(ctx context.Context, r *net.Resolver, host string, tries int, interval time.Duration) error {
	var err error
	for i := 0; i < tries; i++ {
		if _, err = r.LookupHost(ctx, host); err == nil {
			fmt.Printf("%s resolves\n", host)
			return nil
		}
		fmt.Printf("waiting for %s (%d of %d): %v\n", host, i+1, tries, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return fmt.Errorf("%s did not resolve after %d tries %s apart: %w", host, tries, interval, err)
}
