// Package logging builds kiln's logger: structured JSON lines (zap through logr) in production,
// with the object key that controller-runtime adds to every reconcile's logger.
package logging

import (
	"flag"
	"io"
	"os"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Options are the --zap-* flags (encoder, level, stacktrace level, time encoding).
type Options struct{ zap zap.Options }

// BindFlags registers the logging flags; the default is JSON at info level.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.zap.TimeEncoder = zapcore.ISO8601TimeEncoder
	o.zap.BindFlags(fs)
}

// New is the logger the options describe, writing to w (stderr when nil).
func (o *Options) New(w io.Writer) logr.Logger {
	if w == nil {
		w = os.Stderr
	}
	return zap.New(zap.UseFlagOptions(&o.zap), zap.WriteTo(w))
}
