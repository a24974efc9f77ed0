package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/conversion"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/internal/migration"
)

// runMigrateStorage rewrites the objects of kiln's CRDs stored at an older version to the storage
// version and drops the older versions from the CRDs' storedVersions (docs/install.md, Upgrade).
func runMigrateStorage(args []string) error {
	fs := flag.NewFlagSet("kiln migrate-storage", flag.ContinueOnError)
	fs.Usage = func() {
		fs.Output().Write([]byte("Usage: kiln migrate-storage [flags] [CRD...]\n\n" +
			"Rewrites the objects of kiln's CRDs (default: every CRD of more than one version) to the\n" +
			"storage version, then leaves only that version in the CRDs' status.storedVersions.\n\n"))
		fs.PrintDefaults()
	}
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; default $KUBECONFIG, then in-cluster config, then ~/.kube/config")
	method := fs.String("method", string(migration.Auto), "auto: the cluster's StorageVersionMigration API where it is served, else rewrite; storageversionmigration; rewrite: kiln writes each object back")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for each StorageVersionMigration")
	if err := fs.Parse(args); err != nil {
		return err
	}
	crds := fs.Args()
	if len(crds) == 0 {
		crds = conversion.CRDs
	}
	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return migration.Run(ctx, c, migration.Options{CRDs: crds, Method: migration.Method(*method), Timeout: *timeout, Out: os.Stdout})
}
