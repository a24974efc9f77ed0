package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Report is everything a benchmark measured.
type Report struct {
	Date    time.Time `json:"date"`
	Machine string    `json:"machine"`
	Params  Params    `json:"params"`
	Runs    []*Result `json:"runs"`
}

func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "model name") {
				model = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s", runtime.NumCPU(), model, runtime.Version())
}

func splitModes(s string) []string {
	var out []string
	for _, m := range strings.Split(s, ",") {
		if m = strings.TrimSpace(m); m == "floor" || m == "same" || m == "kiln" || isTrainJobMode(m) || isServingMode(m) {
			out = append(out, m)
		} else if m != "" {
			fail(fmt.Errorf("-modes: unknown run %q: use floor, same and/or kiln; or trainjob and/or trainer (TrainJobs by kiln, by Kubeflow Trainer); or isvc and/or kserve (KServe's InferenceServices by kiln, by KServe)", m))
		}
	}
	return out
}

// baseline is the mode kiln is compared with: the same-work floor when it ran, else the floor;
// and how the table names it.
func (r *Report) baseline() (string, string) {
	if len(r.runs("same")) > 0 {
		return "same", "same-work floor (jobs, then their pods + services, by a client)"
	}
	return "floor", "floor (pods + services by a client)"
}

// run is mode's median run by the time until every pod exists (its only run with one round).
func (r *Report) run(mode string) *Result {
	runs := r.runs(mode)
	if len(runs) == 0 {
		return nil
	}
	slices.SortStableFunc(runs, func(a, b *Result) int { return cmp.Compare(a.PodsExist, b.PodsExist) })
	return runs[(len(runs)-1)/2]
}

// runs are mode's runs, in the order they were made.
func (r *Report) runs(mode string) []*Result {
	var out []*Result
	for _, res := range r.Runs {
		if res.Mode == mode {
			out = append(out, res)
		}
	}
	return out
}

// write saves result.json, result.md and timeline.svg in dir.
func (r *Report) write(dir string) error {
	r.Date = time.Now().UTC()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), data, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "result.md"), []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "timeline.svg"), []byte(r.svg()), 0o644)
}

// runNotes writes what every table's reader needs to know of its runs: those that timed out, and
// how kiln's manager ran when not as users run it.
func (r *Report) runNotes(b *strings.Builder) {
	for _, res := range r.Runs {
		if res.Incomplete {
			fmt.Fprintf(b, "**The %s run of round %d timed out**: times it did not reach are 0.\n\n", res.Mode, res.Round)
		}
	}
	p := r.Params
	if p.Profile > 0 {
		fmt.Fprintf(b, "kiln's manager was profiled (PROFILE=%s): it served net/http/pprof and sampled its allocations, which users' managers do not (about 1 MiB more).\n\n", p.Profile)
	}
	if p.ManagerEnv != "" {
		fmt.Fprintf(b, "kiln's environment adds MANAGER_ENV=%q.\n\n", p.ManagerEnv)
	}
	if p.ManagerArgs != "" {
		fmt.Fprintf(b, "kiln's manager runs with MANAGER_ARGS=%q.\n\n", p.ManagerArgs)
	}
}

// markdown is the report's table: kiln next to the floor, and their ratio.
func (r *Report) markdown() string {
	if r.run(modeTrainJob) != nil || r.run(modeTrainer) != nil {
		return r.trainJobMarkdown()
	}
	if r.run(modeServing) != nil || r.run(modeKServe) != nil {
		return r.servingMarkdown()
	}
	base, baseName := r.baseline()
	floor, kiln := r.run(base), r.run("kiln")
	p := r.Params
	var b strings.Builder
	fmt.Fprintf(&b, "J=%d jobs of 1 PS/Master + %d workers (%d pods), pods run %s, PyTorchJob share %.0f%%, %d foreign pods; %s; %s\n\n",
		p.Jobs, p.Workers, p.Jobs*(p.Workers+1), p.Duration, p.PyTorchShare*100, p.Foreign, r.Machine, r.Date.Format("2006-01-02"))
	r.runNotes(&b)
	if p.Rounds > 1 {
		fmt.Fprintf(&b, "%d rounds, the modes alternating; each column is that mode's median round by the time until every pod exists.\n\n", p.Rounds)
	}
	admission := "kiln's webhooks"
	if !p.Webhooks {
		admission = "none (WEBHOOKS=0)"
	}
	apf := "API Priority and Fairness with the default concurrency (400 + 200)"
	if !p.PriorityAndFairness {
		apf = "no API Priority and Fairness and no concurrency limit (APF=0)"
	}
	if p.KilnShares > 0 {
		apf += fmt.Sprintf("; kiln's ServiceAccount in a priority level of its own of %d nominal shares (KILN_SHARES)", p.KilnShares)
	}
	fmt.Fprintf(&b, "Admission of the kiln run: %s; the floors run no controller and no webhook. kiln runs as %s. Jobs are submitted %s. The apiserver serves with %s.\n\n",
		admission, identityName(p.Identity), submitName(p), apf)
	fmt.Fprintf(&b, "| | %s | kiln | kiln / floor |\n|---|---|---|---|\n", baseName)
	secs := func(name string, get func(*Result) float64) {
		row := []string{name, "–", "–", "–"}
		if floor != nil {
			row[1] = fmt.Sprintf("%.1f s", get(floor))
		}
		if kiln != nil {
			row[2] = fmt.Sprintf("%.1f s", get(kiln))
		}
		if floor != nil && kiln != nil && get(floor) > 0 {
			row[3] = fmt.Sprintf("%.2f×", get(kiln)/get(floor))
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	secs("every pod exists", func(r *Result) float64 { return r.PodsExist })
	if p.Rounds > 1 {
		b.WriteString(r.rounds() + "\n")
	}
	if old := r.run("floor"); base == "same" && old != nil {
		fmt.Fprintf(&b, "| every pod exists, floor of pods + services only | %.1f s | | |\n", old.PodsExist)
	}
	if (floor != nil && floor.Submitted > 0) || (kiln != nil && kiln.Submitted > 0) {
		secs("every job submitted", func(r *Result) float64 { return r.Submitted })
		millis := func(name string, get func(*Result) float64) {
			row := []string{name, "–", "–", "–"}
			if floor != nil {
				row[1] = ms(get(floor)) + " ms"
			}
			if kiln != nil {
				row[2] = ms(get(kiln)) + " ms"
			}
			if floor != nil && kiln != nil && get(floor) > 0 {
				row[3] = fmt.Sprintf("%.1f×", get(kiln)/get(floor))
			}
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
		millis("each submission (a user's create), p50", func(r *Result) float64 { return r.CreateLatency.P50 })
		millis("each submission (a user's create), p99", func(r *Result) float64 { return r.CreateLatency.P99 })
		// A create of a second or more ends a burst (internal/burst): the jobs before it go on.
		millis("each submission (a user's create), the longest", func(r *Result) float64 { return r.CreateLatency.Max })
	}
	secs("every job's pods run", func(r *Result) float64 { return r.AllRunning })
	secs("every job succeeded", func(r *Result) float64 { return r.AllSucceeded })
	secs("job time-to-running p50", func(r *Result) float64 { return r.TimeToRunning.P50 })
	secs("job time-to-running p99", func(r *Result) float64 { return r.TimeToRunning.P99 })
	other := func(name string, floorVal, kilnVal string) {
		fmt.Fprintf(&b, "| %s | %s | %s | |\n", name, floorVal, kilnVal)
	}
	apiserver := func(res *Result) string {
		if res == nil {
			return "–"
		}
		return verbs(res.APIServerRequests)
	}
	other("apiserver requests served", apiserver(floor), apiserver(kiln))
	busiest := func(res *Result) string {
		if res == nil {
			return "–"
		}
		return topSeconds(res.APIServerSeconds, 5)
	}
	other("apiserver request seconds, top 5", busiest(floor), busiest(kiln))
	latency := func(res *Result) string {
		if res == nil {
			return "–"
		}
		return topLatencies(res.APIServerLatency, 6)
	}
	other("apiserver latency p50/p99, the 6 most served", latency(floor), latency(kiln))
	inFlight := func(res *Result) string {
		if res == nil {
			return "–"
		}
		return loadSummary(res.Load)
	}
	other("apiserver requests in flight, peak/mean", inFlight(floor), inFlight(kiln))
	nodes := func(res *Result) string {
		if res == nil || res.Nodes == 0 {
			return "–"
		}
		return fmt.Sprintf("%d", res.Nodes)
	}
	other("cluster: fake nodes", nodes(floor), nodes(kiln))
	for _, name := range []string{"kube-apiserver", "etcd", "kube-scheduler", "kwok-controller"} {
		cpu := func(res *Result) string {
			if res == nil {
				return "–"
			}
			if s, ok := res.ComponentCPU[name]; ok {
				return fmt.Sprintf("%.1f s", s)
			}
			return "–"
		}
		other(name+" CPU", cpu(floor), cpu(kiln))
	}
	if kiln != nil && len(kiln.WebhookSeconds) > 0 {
		other("of which waiting on admission webhooks", "", topSeconds(kiln.WebhookSeconds, len(kiln.WebhookSeconds)))
	}
	if kiln != nil && kiln.Manager != nil && len(kiln.Manager.WebhookSeconds) > 0 {
		other("kiln's webhook handlers", "", topSeconds(kiln.Manager.WebhookSeconds, len(kiln.Manager.WebhookSeconds)))
	}
	if kiln != nil && kiln.Manager != nil {
		m := kiln.Manager
		if kiln.StatusRunning > 0 {
			other("every job's Running condition", "", fmt.Sprintf("%.1f s", kiln.StatusRunning))
		}
		replicas := float64(p.Jobs * (p.Workers + 1))
		other("manager CPU", "", fmt.Sprintf("%.1f s (%.2f ms per replica), of which starting %.1f s (after it: %.2f ms per replica)",
			m.CPUSeconds, m.CPUSeconds*1000/replicas, m.StartCPUSeconds, (m.CPUSeconds-m.StartCPUSeconds)*1000/replicas))
		other("manager peak RSS", "", fmt.Sprintf("%.0f MiB", m.PeakRSSMiB))
		other("manager requests", "", verbs(m.Requests))
		if len(m.Reconciles) > 0 {
			other("manager reconciles per job", "", perJob(m.Reconciles, p.Jobs))
		}
		other("manager writes per replica: pods + services + status", "", fmt.Sprintf("%.2f", m.CreatesAndStatusPerReplica))
		other("manager writes per replica: all", "", fmt.Sprintf("%.2f (%s)", m.WritesPerReplica, verbs(m.Writes)))
		w := kiln.StatusWritesWhileRunning
		other("job status writes while it just runs (mean, max)", "", fmt.Sprintf("%.2f, %d", w.Mean, w.Max))
		if len(kiln.StatusWrites) > 0 {
			other("jobs by status writes (writes: jobs)", "", byCount(kiln.StatusWrites))
			f := kiln.FirstStatusWrite
			other("job created until its first status write p50 / p99", "", fmt.Sprintf("%.1f s / %.1f s", f.P50, f.P99))
		}
	}
	return b.String()
}

// perJob is each count of m divided by jobs, by key.
func perJob(m map[string]int, jobs int) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, float64(m[k])/float64(jobs)))
	}
	return strings.Join(parts, ", ")
}

func verbs(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// byCount lists m's entries as "count: n", by count.
func byCount(m map[int]int) string {
	counts := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = fmt.Sprintf("%d: %d", c, m[c])
	}
	return strings.Join(parts, ", ")
}

// rounds is the table row of every round's time until every pod exists, and their ratios.
func (r *Report) rounds() string {
	base, _ := r.baseline()
	floor, kiln := r.runs(base), r.runs("kiln")
	list := func(runs []*Result) string {
		parts := make([]string, len(runs))
		for i, res := range runs {
			parts[i] = fmt.Sprintf("%.1f", res.PodsExist)
		}
		return strings.Join(parts, ", ") + " s"
	}
	var ratios []string
	for i := range min(len(floor), len(kiln)) {
		if floor[i].PodsExist > 0 {
			ratios = append(ratios, fmt.Sprintf("%.2f×", kiln[i].PodsExist/floor[i].PodsExist))
		}
	}
	return fmt.Sprintf("| every pod exists, each round | %s | %s | %s |", list(floor), list(kiln), strings.Join(ratios, ", "))
}

// svg draws jobs running and succeeded over time for each mode's median run.
func (r *Report) svg() string {
	var shown []*Result
	for _, mode := range []string{"floor", "same", "kiln"} {
		if res := r.run(mode); res != nil {
			shown = append(shown, res)
		}
	}
	const w, h, left, bottom, top, right = 720.0, 360.0, 60.0, 40.0, 30.0, 150.0
	tmax, ymax := 1.0, float64(r.Params.Jobs)
	for _, res := range shown {
		for _, pt := range res.Timeline {
			tmax = max(tmax, pt.T)
		}
	}
	x := func(t float64) float64 { return left + t/tmax*(w-left-right) }
	y := func(v float64) float64 { return h - bottom - v/ymax*(h-bottom-top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18">jobs running / succeeded over time (J=%d, W=%d, D=%s)</text>`+"\n", left, r.Params.Jobs, r.Params.Workers, r.Params.Duration)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, y(0), w-right, y(0))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, y(0), left, y(ymax))
	for i := 0; i <= 4; i++ {
		t, v := tmax*float64(i)/4, ymax*float64(i)/4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%.0fs</text>`+"\n", x(t), h-bottom+16, t)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%.0f</text>`+"\n", left-6, y(v)+4, v)
	}
	colors := map[string][2]string{"floor": {"#999999", "#333333"}, "same": {"#8ecae6", "#023047"}, "kiln": {"#f4a261", "#d62828"}}
	legend := 0
	for _, res := range shown {
		for i, series := range []string{"running", "succeeded"} {
			var pts []string
			for _, pt := range res.Timeline {
				v := pt.Running
				if series == "succeeded" {
					v = pt.Succeeded
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(pt.T), y(float64(v))))
			}
			color := colors[res.Mode][i]
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
			ly := top + 20 + float64(legend)*18
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"/><text x="%.0f" y="%.0f">%s %s</text>`+"\n",
				w-right+10, ly, w-right+30, ly, color, w-right+35, ly+4, res.Mode, series)
			legend++
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// topSeconds lists the n largest entries of m, largest first.
func topSeconds(m map[string]float64, n int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	parts := make([]string, 0, n)
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %.0f s", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func identityName(identity string) string {
	if identity == identityAdmin {
		return "the cluster's admin (IDENTITY=admin: API Priority and Fairness exempts it)"
	}
	return "its install's ServiceAccount, with the install's RBAC"
}

func submitName(p Params) string {
	if p.Submit == "serial" {
		return "one create at a time (SUBMIT=serial); the same-work floor submits every job, then creates their pods and services"
	}
	return fmt.Sprintf("%d creates in flight", p.Parallelism)
}

// loadSummary is the peak and mean of the apiserver's requests in flight (mutating, read-only)
// and of those each priority level that executed any ran.
func loadSummary(points []LoadPoint) string {
	var parts []string
	for _, kind := range []string{"mutating", "readOnly"} {
		peak, mean := peakAndMean(points, func(p LoadPoint) float64 { return p.InFlight[kind] })
		parts = append(parts, fmt.Sprintf("%s %.0f/%.1f", kind, peak, mean))
	}
	levels := map[string]bool{}
	for _, p := range points {
		for l := range p.Executing {
			levels[l] = true
		}
	}
	for _, l := range slices.Sorted(maps.Keys(levels)) {
		peak, mean := peakAndMean(points, func(p LoadPoint) float64 { return p.Executing[l] })
		if peak > 0 {
			parts = append(parts, fmt.Sprintf("level %s %.0f/%.1f", l, peak, mean))
		}
	}
	return joinOr(parts)
}
