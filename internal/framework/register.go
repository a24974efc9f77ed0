package framework

import (
	"fmt"
	"slices"
	"strings"
)

// Set is the frameworks one operator serves, keyed by lowercase kind. Add is the only way in, so
// every framework in a Set is complete and its kind is served once.
type Set struct {
	byKind map[string]Framework
	order  []string
}

// Add registers fw. It fails, naming the framework, when a required part is missing or another
// framework already serves its kind: the operator refuses to start rather than run a framework
// that would fail on its first job.
func (s *Set) Add(fw Framework) error {
	if err := Check(fw); err != nil {
		return err
	}
	key := strings.ToLower(fw.Kind)
	if was, ok := s.byKind[key]; ok {
		return fmt.Errorf("framework %q: kind %s is already served by framework %q; register one framework per kind", fw.Name, fw.Kind, was.Name)
	}
	if s.byKind == nil {
		s.byKind = map[string]Framework{}
	}
	s.byKind[key] = fw
	s.order = append(s.order, key)
	return nil
}

// Get is the framework of a lowercase kind.
func (s *Set) Get(kind string) (Framework, bool) {
	fw, ok := s.byKind[strings.ToLower(kind)]
	return fw, ok
}

// Kinds are the lowercase kinds of the set, sorted.
func (s *Set) Kinds() []string {
	return slices.Sorted(slices.Values(s.order))
}

// All are the set's frameworks in the order they were added.
func (s *Set) All() []Framework {
	out := make([]Framework, len(s.order))
	for i, k := range s.order {
		out[i] = s.byKind[k]
	}
	return out
}

// Check says which required parts of fw are missing (the fields Framework does not mark
// optional), naming the framework.
func Check(fw Framework) error {
	var missing []string
	need := func(ok bool, part string) {
		if !ok {
			missing = append(missing, part)
		}
	}
	need(fw.Kind != "", "Kind")
	need(fw.Name != "", "Name")
	need(fw.ControllerName != "", "ControllerName")
	need(fw.ReplicaSpecsField != "", "ReplicaSpecsField")
	need(len(fw.ReplicaTypes) > 0, "ReplicaTypes")
	need(fw.DefaultRestartPolicy != "", "DefaultRestartPolicy")
	need(fw.NewJob != nil, "NewJob")
	need(fw.NewJobList != nil, "NewJobList")
	need(fw.SetClusterSpec != nil, "SetClusterSpec")
	need(fw.IsMasterRole != nil, "IsMasterRole")
	need(fw.Outcome != nil, "Outcome")
	var wrong []string
	if len(missing) > 0 {
		wrong = append(wrong, "lacks "+strings.Join(missing, ", "))
	}
	if (fw.DefaultPortName == "") != (fw.DefaultPort == 0) {
		wrong = append(wrong, "sets only one of DefaultPortName and DefaultPort (set both or neither)")
	}
	if len(fw.ExtraKinds) > 0 && fw.Extras == nil {
		wrong = append(wrong, "lists ExtraKinds but builds no Extras")
	}
	if fw.NewJob != nil && fw.NewJob() == nil {
		wrong = append(wrong, "has a NewJob that returns nil")
	}
	if len(wrong) == 0 {
		return nil
	}
	name := fw.Name
	if name == "" {
		name = fw.Kind
	}
	return fmt.Errorf("framework %q %s", name, strings.Join(wrong, "; "))
}
