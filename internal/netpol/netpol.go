// Package netpol builds the NetworkPolicies that fence a training job's pods (they talk to each
// other and to DNS only, plus the egress the job lists) and an InferenceService's (ingress only
// from the peers its spec names). A job opts in with the annotation kiln.dev/network-policy:
// isolated, or the operator makes it the default (--default-network-policy); "none" opts out.
// NetworkPolicies are enforced by the cluster's network plugin: without one that does, they are
// stored and do nothing.
package netpol

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The annotations of a job, and their values.
const (
	// Annotation chooses the job's network policy: Isolated or None.
	Annotation = "kiln.dev/network-policy"
	// EgressAnnotation lists, comma-separated, what an isolated job may also reach: CIDRs, each
	// with an optional TCP port (10.0.0.0/8, 0.0.0.0/0:443).
	EgressAnnotation = "kiln.dev/network-policy-egress"
	Isolated         = "isolated"
	None             = "none"
)

// Mode is the job's network policy: its annotation's, else def ("" is None).
func Mode(annotations map[string]string, def string) string {
	if v := annotations[Annotation]; v != "" {
		return v
	}
	if def == "" {
		return None
	}
	return def
}

// Name is the NetworkPolicy of a job or InferenceService.
func Name(owner string) string { return owner + "-network-policy" }

// Validate checks a job's annotations, naming the field and the fix.
func Validate(annotations map[string]string) field.ErrorList {
	path := field.NewPath("metadata", "annotations")
	var errs field.ErrorList
	if v, ok := annotations[Annotation]; ok && v != Isolated && v != None {
		errs = append(errs, field.NotSupported(path.Key(Annotation), v, []string{Isolated, None}))
	}
	if v, ok := annotations[EgressAnnotation]; ok {
		if _, err := Egress(v); err != nil {
			errs = append(errs, field.Invalid(path.Key(EgressAnnotation), v, err.Error()))
		}
	}
	return errs
}

// ValidatePeers checks the peers an InferenceService lets in as the apiserver checks a
// NetworkPolicy's: each names pods or namespaces by valid label selectors, or an IP block, not
// both; the block's CIDR parses and its exceptions lie inside it.
func ValidatePeers(from []networkingv1.NetworkPolicyPeer, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, p := range from {
		at := path.Index(i)
		selects := p.PodSelector != nil || p.NamespaceSelector != nil
		switch {
		case !selects && p.IPBlock == nil:
			errs = append(errs, field.Required(at, "name a podSelector, a namespaceSelector or an ipBlock"))
		case selects && p.IPBlock != nil:
			errs = append(errs, field.Forbidden(at.Child("ipBlock"), "must not be set with podSelector or namespaceSelector: make it a peer of its own"))
		}
		if s := p.PodSelector; s != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, at.Child("podSelector"))...)
		}
		if s := p.NamespaceSelector; s != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, at.Child("namespaceSelector"))...)
		}
		if b := p.IPBlock; b != nil {
			errs = append(errs, validateIPBlock(b, at.Child("ipBlock"))...)
		}
	}
	return errs
}

// validateIPBlock parses CIDRs strictly, as the apiserver does a NetworkPolicy's since
// Kubernetes 1.37 (no leading zeros: the fuzz saw 010.0.0.0/8 refused; no address bits past the
// prefix: it saw 10.0.0.8/8 refused).
func validateIPBlock(b *networkingv1.IPBlock, path *field.Path) field.ErrorList {
	block, problem := strictCIDR(b.CIDR)
	if problem != "" {
		return field.ErrorList{field.Invalid(path.Child("cidr"), b.CIDR, problem+" such as 10.0.0.0/8")}
	}
	var errs field.ErrorList
	size, _ := block.Mask.Size()
	for i, e := range b.Except {
		except, problem := strictCIDR(e)
		if problem != "" {
			errs = append(errs, field.Invalid(path.Child("except").Index(i), e, problem+" such as 10.1.0.0/16"))
			continue
		}
		if n, _ := except.Mask.Size(); !block.Contains(except.IP) || n <= size {
			errs = append(errs, field.Invalid(path.Child("except").Index(i), e, fmt.Sprintf("must be a smaller range inside cidr %s", b.CIDR)))
		}
	}
	return errs
}

// strictCIDR is the network of cidr, or what is wrong with it ("must be a CIDR", "must be the
// CIDR <network>" when address bits are set past the prefix), for a message that goes on with
// an example.
func strictCIDR(cidr string) (*net.IPNet, string) {
	ip, block, err := net.ParseCIDR(cidr)
	switch {
	case err != nil:
		return nil, "must be a CIDR"
	case !ip.Equal(block.IP):
		return nil, fmt.Sprintf("must have no address bits past the prefix (%s), a network", block)
	}
	return block, ""
}

var dnsPort, tcp, udp = intstr.FromInt32(53), corev1.ProtocolTCP, corev1.ProtocolUDP

// Egress parses the egress annotation: CIDRs, each with an optional TCP port.
func Egress(v string) ([]networkingv1.NetworkPolicyEgressRule, error) {
	var rules []networkingv1.NetworkPolicyEgressRule
	for _, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		cidr, port, hasPort := strings.Cut(entry, ":")
		if strings.Count(entry, ":") > 1 { // IPv6: the port follows the last ']:' if any
			cidr, port, hasPort = entry, "", false
			if i := strings.LastIndex(entry, "]:"); i > 0 {
				cidr, port, hasPort = strings.Trim(entry[:i+1], "[]"), entry[i+2:], true
			}
		}
		if _, problem := strictCIDR(cidr); problem != "" {
			return nil, fmt.Errorf("%q %s: write a CIDR with an optional port, e.g. 10.0.0.0/8 or 0.0.0.0/0:443", entry, problem)
		}
		rule := networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}}}
		if hasPort {
			n, err := strconv.Atoi(port)
			if err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("%q has port %q: want 1 to 65535", entry, port)
			}
			p := intstr.FromInt(n)
			rule.Ports = []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}}
		}
		rules = append(rules, rule)
	}
	return rules, nil
}

// EgressOf is the egress a job's annotations list; a malformed list (the webhook refuses it; one
// stored before it) adds nothing, so the policy stays closed.
func EgressOf(annotations map[string]string) []networkingv1.NetworkPolicyEgressRule {
	rules, err := Egress(annotations[EgressAnnotation])
	if err != nil {
		return nil
	}
	return rules
}

// ForJob lets the pods selected by pods talk to each other and to DNS (port 53 anywhere: cluster
// DNS, a node-local cache), and reach egress; nothing else in or out.
func ForJob(name, ns string, pods map[string]string, egress []networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
	self := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: pods}}}
	rules := append([]networkingv1.NetworkPolicyEgressRule{
		{To: self},
		{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dnsPort}, {Protocol: &tcp, Port: &dnsPort}}},
	}, egress...)
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: Name(name), Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: pods},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: self}},
			Egress:      rules,
		},
	}
}

// ForService lets only from reach the pods selected by pods (egress is left open). No peers is
// no ingress rule at all: no one (an ingress rule with no peers would admit everyone).
func ForService(name, ns string, pods map[string]string, from []networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
	var ingress []networkingv1.NetworkPolicyIngressRule
	if len(from) > 0 {
		ingress = []networkingv1.NetworkPolicyIngressRule{{From: from}}
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: Name(name), Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: pods},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
}
