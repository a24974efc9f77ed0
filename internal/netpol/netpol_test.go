package netpol

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestEgress(t *testing.T) {
	rules, err := Egress(" 10.0.0.0/8, 0.0.0.0/0:443,[2001:db8::/32]:8443 ,")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 3 || rules[0].To[0].IPBlock.CIDR != "10.0.0.0/8" || rules[0].Ports != nil ||
		rules[1].Ports[0].Port.IntValue() != 443 || rules[2].To[0].IPBlock.CIDR != "2001:db8::/32" || rules[2].Ports[0].Port.IntValue() != 8443 {
		t.Errorf("rules %+v", rules)
	}
	for _, bad := range []string{"s3.amazonaws.com", "10.0.0.0/8:http", "10.0.0.0/8:70000", "10.0.0.1", "10.0.0.8/8:443"} {
		if _, err := Egress(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestValidateNamesTheAnnotation(t *testing.T) {
	errs := Validate(map[string]string{Annotation: "closed", EgressAnnotation: "example.com"})
	if len(errs) != 2 || !strings.Contains(errs.ToAggregate().Error(), `metadata.annotations[kiln.dev/network-policy]: Unsupported value: "closed"`) ||
		!strings.Contains(errs.ToAggregate().Error(), "with an optional port, e.g. 10.0.0.0/8 or 0.0.0.0/0:443") {
		t.Errorf("errors: %v", errs)
	}
	if errs := Validate(map[string]string{Annotation: Isolated, EgressAnnotation: "0.0.0.0/0:443"}); len(errs) != 0 {
		t.Errorf("valid annotations refused: %v", errs)
	}
}

// ValidatePeers refuses, naming the field, every peer a NetworkPolicy may not have, and takes
// the ones it may.
func TestValidatePeers(t *testing.T) {
	sel := func(k string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: "a"}}
	}
	block := func(cidr string, except ...string) *networkingv1.IPBlock {
		return &networkingv1.IPBlock{CIDR: cidr, Except: except}
	}
	for _, c := range []struct {
		peer networkingv1.NetworkPolicyPeer
		want string // "" when valid
	}{
		{networkingv1.NetworkPolicyPeer{PodSelector: sel("app")}, ""},
		{networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team"), PodSelector: sel("app")}, ""},
		{networkingv1.NetworkPolicyPeer{IPBlock: block("10.0.0.0/8", "10.1.0.0/16")}, ""},
		{networkingv1.NetworkPolicyPeer{}, "from[0]: Required value"},
		{networkingv1.NetworkPolicyPeer{PodSelector: sel("_")}, "from[0].podSelector.matchLabels"},
		{networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("a b")}, "from[0].namespaceSelector.matchLabels"},
		{networkingv1.NetworkPolicyPeer{PodSelector: sel("app"), IPBlock: block("10.0.0.0/8")}, "from[0].ipBlock: Forbidden"},
		{networkingv1.NetworkPolicyPeer{IPBlock: block("10.0.0.1")}, "from[0].ipBlock.cidr"},
		{networkingv1.NetworkPolicyPeer{IPBlock: block("010.0.0.0/8")}, "from[0].ipBlock.cidr"},
		{networkingv1.NetworkPolicyPeer{IPBlock: block("10.0.0.8/8")}, "from[0].ipBlock.cidr: Invalid value: \"10.0.0.8/8\": must have no address bits past the prefix (10.0.0.0/8)"},
		{networkingv1.NetworkPolicyPeer{IPBlock: block("10.0.0.0/8", "10.1.0.1/16")}, "from[0].ipBlock.except[0]"},
		{networkingv1.NetworkPolicyPeer{IPBlock: block("10.0.0.0/8", "192.168.0.0/16")}, "from[0].ipBlock.except[0]"},
		{networkingv1.NetworkPolicyPeer{IPBlock: block("10.0.0.0/8", "10.0.0.0/8")}, "from[0].ipBlock.except[0]"},
	} {
		errs := ValidatePeers([]networkingv1.NetworkPolicyPeer{c.peer}, field.NewPath("from"))
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%+v refused: %v", c.peer, errs)
		case c.want != "" && !strings.Contains(errs.ToAggregate().Error(), c.want):
			t.Errorf("%+v: %v, want an error naming %s", c.peer, errs, c.want)
		}
	}
}

// An isolated job's pods reach each other and DNS, and what it lists; an ingress rule admits only
// themselves.
func TestForJob(t *testing.T) {
	egress, _ := Egress("0.0.0.0/0:443")
	np := ForJob("bert", "ml", map[string]string{"job": "bert"}, egress)
	s := np.Spec
	if np.Name != "bert-network-policy" || len(s.PolicyTypes) != 2 || len(s.Ingress) != 1 || s.Ingress[0].From[0].PodSelector.MatchLabels["job"] != "bert" ||
		len(s.Egress) != 3 || s.Egress[1].Ports[0].Port.IntValue() != 53 || s.Egress[2].Ports[0].Port.IntValue() != 443 {
		t.Errorf("policy %+v", np)
	}
	if Mode(nil, "") != None || Mode(map[string]string{Annotation: None}, Isolated) != None || Mode(nil, Isolated) != Isolated {
		t.Error("Mode does not prefer the annotation to the default")
	}
}
