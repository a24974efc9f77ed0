package servingcert

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The Secret's CA keys, next to the kubernetes.io/tls keys tls.crt and tls.key. ca.crt holds the
// current CA first, then earlier CAs that are still valid, so certificates they signed keep
// verifying while replicas pick up a renewal.
const (
	caCertKey = "ca.crt"
	caKeyKey  = "ca.key"
)

// caLifetimes is how many serving-certificate lifetimes the CA lives.
const caLifetimes = 10

// renew returns the Secret data with a CA and serving certificate valid at now for opts, and
// whether it differs from data. A new CA comes first in the bundle, followed by the CAs still
// valid of the Secret's bundle and of trusted (the bundle this process last injected: a Secret
// deleted and made anew keeps trusting the CA the apiserver still trusts). It is pure apart from
// the randomness of new keys.
func renew(data map[string][]byte, trusted []*x509.Certificate, now time.Time, opts Options) (map[string][]byte, bool, error) {
	out := map[string][]byte{}
	for k, v := range data {
		out[k] = v
	}
	caCerts := parseCerts(data[caCertKey])
	ca, caKey := currentCA(caCerts, data[caKeyKey])
	changed := false
	if ca == nil || due(ca, now) {
		var err error
		ca, caKey, err = newCA(now, opts.CertValidity*caLifetimes)
		if err != nil {
			return nil, false, err
		}
		keep := []*x509.Certificate{ca}
		for _, c := range append(caCerts, trusted...) {
			if now.Before(c.NotAfter) && !slices.ContainsFunc(keep, func(k *x509.Certificate) bool { return k.Equal(c) }) {
				keep = append(keep, c)
			}
		}
		out[caCertKey], out[caKeyKey] = encodeCerts(keep), encodeKey(caKey)
		changed = true
	}
	if changed || !servingValid(data, ca, now, opts) {
		certPEM, keyPEM, err := newServing(ca, caKey, now, opts)
		if err != nil {
			return nil, false, err
		}
		out[corev1.TLSCertKey], out[corev1.TLSPrivateKeyKey] = certPEM, keyPEM
		changed = true
	}
	return out, changed, nil
}

// due says a certificate has less than a third of its lifetime left (or is not yet valid).
func due(c *x509.Certificate, now time.Time) bool {
	life := c.NotAfter.Sub(c.NotBefore)
	return now.Before(c.NotBefore) || now.After(c.NotAfter.Add(-life/3))
}

// servingValid says the stored serving certificate is signed by ca, names exactly what opts
// asks for, matches its key and is not due.
func servingValid(data map[string][]byte, ca *x509.Certificate, now time.Time, opts Options) bool {
	certs := parseCerts(data[corev1.TLSCertKey])
	if len(certs) == 0 || due(certs[0], now) || certs[0].CheckSignatureFrom(ca) != nil {
		return false
	}
	if _, err := tlsKeyPair(data); err != nil {
		return false
	}
	c := certs[0]
	return slices.Equal(sorted(c.DNSNames), sorted(opts.DNSNames)) && slices.Equal(ipStrings(c.IPAddresses), ipStrings(opts.IPAddresses))
}

// currentCA is the first certificate of the bundle when key is its private key.
func currentCA(certs []*x509.Certificate, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey) {
	if len(certs) == 0 {
		return nil, nil
	}
	key, err := parseKey(keyPEM)
	if err != nil || !key.PublicKey.Equal(certs[0].PublicKey) {
		return nil, nil
	}
	return certs[0], key
}

func newCA(now time.Time, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "kiln-webhook-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the webhook CA: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func newServing(ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time, opts Options) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	cn := "kiln-webhook"
	if len(opts.DNSNames) > 0 {
		cn = opts.DNSNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     opts.DNSNames,
		IPAddresses:  opts.IPAddresses,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(opts.CertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the webhook serving certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), encodeKey(key), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

func parseCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil && block.Type == "CERTIFICATE" {
			out = append(out, c)
		}
	}
}

func encodeCerts(certs []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

func parseKey(data []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("no PEM block")
	}
	return x509.ParseECPrivateKey(block.Bytes)
}

func encodeKey(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	slices.Sort(out)
	return out
}

func tlsKeyPair(data map[string][]byte) (tls.Certificate, error) {
	return tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
}
