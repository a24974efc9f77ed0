// Package logging checks kiln's log lines: JSON, with the key of the object being reconciled.
package logging

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/kiln-ml/kiln/internal/logging"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, nil)) }

func TestLogLinesAreJSONWithTheJobKey(t *testing.T) {
	var buf testenv.SyncBuffer
	var opts logging.Options
	fs := flag.NewFlagSet("kiln manager", flag.ContinueOnError)
	opts.BindFlags(fs)
	if err := fs.Parse([]string{"--zap-log-level=4"}); err != nil { // the production defaults, with V(4) detail
		t.Fatal(err)
	}
	mo := testenv.ManagerOptions()
	mo.Logger = opts.New(&buf)
	stop, err := env.StartManager(mo)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	ns := env.Namespace(t)
	job := builder.TFJob("logged", ns).Replicas("Worker", 2).Obj()
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		for _, l := range buf.Lines() {
			var line map[string]any
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				return fmt.Errorf("not a JSON line: %s", l)
			}
			key, _ := line["TFJob"].(map[string]any)
			if line["msg"] == "creating" && key["name"] == "logged" && key["namespace"] == ns {
				return nil
			}
		}
		return fmt.Errorf("no JSON line about creating logged's pods with its key among %d lines", len(buf.Lines()))
	})
	for _, l := range buf.Lines() {
		if !json.Valid([]byte(l)) {
			t.Errorf("not a JSON line: %s", l)
		}
	}
}
