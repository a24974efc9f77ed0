package replicajob

import (
	"slices"
	"strconv"
	"strings"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// indexSet is a set of replica indexes, written as the batch Job writes completedIndexes:
// ascending, runs of three or more as "first-last" ("0,2-4,7").
type indexSet map[int]bool

// parseIndexes reads replicaStatuses[*].completedIndexes, keeping the indexes below limit (a job
// scaled down has none beyond its replicas). A part that does not parse is skipped: the status is
// kiln's own writing, and an index missing from it only means that index may run again.
func parseIndexes(s string, limit int) indexSet {
	if s == "" {
		return nil
	}
	set := indexSet{}
	for _, part := range strings.Split(s, ",") {
		first, last, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(first)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(last); err != nil {
				continue
			}
		}
		for i := max(a, 0); i <= b && i < limit; i++ {
			set[i] = true
		}
	}
	return set
}

func (s indexSet) String() string {
	idx := make([]int, 0, len(s))
	for i := range s {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var b strings.Builder
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(idx[i]))
		switch {
		case j-i >= 2:
			b.WriteString("-" + strconv.Itoa(idx[j]))
		case j > i:
			b.WriteString("," + strconv.Itoa(idx[j]))
		}
		i = j + 1
	}
	return b.String()
}

// completedOf is what the job's status says of rtype's completed indexes below n.
func completedOf(st *kubeflowv1.JobStatus, rtype kubeflowv1.ReplicaType, n int) indexSet {
	if rs := st.ReplicaStatuses[rtype]; rs != nil {
		return parseIndexes(rs.CompletedIndexes, n)
	}
	return nil
}

// completedGrew says whether an index completed since the status old was written: that is
// written as soon as a condition turning would be, so a pod that goes soon after it succeeded is
// not run again.
func completedGrew(old, now *kubeflowv1.JobStatus) bool {
	for t, rs := range now.ReplicaStatuses {
		if rs == nil || rs.CompletedIndexes == "" {
			continue
		}
		if was := old.ReplicaStatuses[t]; was == nil || was.CompletedIndexes != rs.CompletedIndexes {
			return true
		}
	}
	return false
}
