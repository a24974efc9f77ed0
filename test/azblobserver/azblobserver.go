// Package azblobserver runs, for tests, the part of the Azure Blob Storage REST API a model fetch
// reads — listing a container and getting a blob — with Azure's authorization: Shared Key (the
// signature computed as Azure documents it, so a wrong account key is refused with
// AuthenticationFailed, as Azure refuses it), a SAS token, or anonymous reads of a public
// container. No Azure storage emulator is written in Go, so this one is the project's own: it
// stores blobs in memory and answers as the service does for these two calls.
package azblobserver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The account the server serves and the credentials it accepts.
const (
	Account = "kilntest"
	// SASSignature is the sig of the one SAS token the server accepts (SASToken).
	SASSignature = "kiln-test-sas-signature"
	SASToken     = "sv=2023-11-03&ss=b&srt=co&sp=rl&se=2099-01-01T00%3A00%3A00Z&sig=" + SASSignature
)

// Key is the account's key, base64 as Azure gives it.
var Key = base64.StdEncoding.EncodeToString([]byte("kiln-test-account-key"))

// Server is a running Blob service for Account.
type Server struct {
	// Host is host:port, what AZURE_STORAGE_DOMAIN names (with AZURE_STORAGE_PROTOCOL=http).
	Host string

	mu     sync.Mutex
	blobs  map[string]map[string][]byte // container → name → body
	public map[string]bool
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	s := &Server{blobs: map[string]map[string][]byte{}, public: map[string]bool{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.Host = strings.TrimPrefix(srv.URL, "http://")
	return s
}

// Put stores a blob.
func (s *Server) Put(container, name string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blobs[container] == nil {
		s.blobs[container] = map[string][]byte{}
	}
	s.blobs[container][name] = body
}

// Public lets anyone read the container, as a container with public access "container".
func (s *Server) Public(container string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.public[container] = true
}

var modified = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Format(http.TimeFormat)

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Path style, as for an emulator: /<account>/<container>[/<blob>].
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 2 || parts[0] != Account {
		fail(w, http.StatusBadRequest, "InvalidUri", "the path is not /"+Account+"/<container>[/<blob>]")
		return
	}
	container := parts[1]
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.authorized(r, container); err != nil {
		fail(w, http.StatusForbidden, "AuthenticationFailed", err.Error())
		return
	}
	blobs, ok := s.blobs[container]
	if !ok {
		fail(w, http.StatusNotFound, "ContainerNotFound", "The specified container does not exist.")
		return
	}
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && len(parts) == 2 && q.Get("restype") == "container" && q.Get("comp") == "list":
		list(w, container, q.Get("prefix"), blobs)
	case r.Method == http.MethodGet && len(parts) == 3:
		body, ok := blobs[parts[2]]
		if !ok {
			fail(w, http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
			return
		}
		h := w.Header()
		h.Set("Content-Length", strconv.Itoa(len(body)))
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Last-Modified", modified)
		h.Set("ETag", `"0x1"`)
		h.Set("x-ms-blob-type", "BlockBlob")
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	default:
		fail(w, http.StatusNotImplemented, "NotImplemented", "this test server lists containers and gets blobs only")
	}
}

// authorized checks the request's Shared Key signature or SAS token; a public container needs
// neither.
func (s *Server) authorized(r *http.Request, container string) error {
	auth := r.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(auth, "SharedKey "):
		account, sig, _ := strings.Cut(strings.TrimPrefix(auth, "SharedKey "), ":")
		if account != Account {
			return fmt.Errorf("the account %s does not exist", account)
		}
		key, _ := base64.StdEncoding.DecodeString(Key)
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(stringToSign(r)))
		if !hmac.Equal([]byte(sig), []byte(base64.StdEncoding.EncodeToString(mac.Sum(nil)))) {
			return fmt.Errorf("the MAC signature found in the HTTP request is not the same as any computed signature")
		}
		return nil
	case r.URL.Query().Has("sig"):
		if r.URL.Query().Get("sig") != SASSignature {
			return fmt.Errorf("signature did not match")
		}
		return nil
	case s.public[container]:
		return nil
	}
	return fmt.Errorf("the container %s is not public and the request is not authorized", container)
}

// stringToSign is what Azure signs for Shared Key authorization of a Blob service request.
func stringToSign(r *http.Request) string {
	h := r.Header
	length := h.Get("Content-Length")
	if length == "0" {
		length = ""
	}
	var names []string
	for name := range h {
		if n := strings.ToLower(name); strings.HasPrefix(n, "x-ms-") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var headers []string
	for _, n := range names {
		headers = append(headers, n+":"+strings.Join(h.Values(n), ","))
	}
	resource := "/" + Account + r.URL.EscapedPath()
	q, _ := url.ParseQuery(r.URL.RawQuery)
	var params []string
	for k := range q {
		params = append(params, k)
	}
	sort.Strings(params)
	for _, k := range params {
		v := q[k]
		sort.Strings(v)
		resource += "\n" + strings.ToLower(k) + ":" + strings.Join(v, ",")
	}
	return strings.Join([]string{r.Method, h.Get("Content-Encoding"), h.Get("Content-Language"), length,
		h.Get("Content-MD5"), h.Get("Content-Type"), h.Get("Date"), h.Get("If-Modified-Since"), h.Get("If-Match"),
		h.Get("If-None-Match"), h.Get("If-Unmodified-Since"), h.Get("Range"), strings.Join(headers, "\n"), resource}, "\n")
}

type enumeration struct {
	XMLName       xml.Name `xml:"EnumerationResults"`
	ContainerName string   `xml:"ContainerName,attr"`
	Prefix        string   `xml:"Prefix"`
	Blobs         []item   `xml:"Blobs>Blob"`
}

type item struct {
	Name       string `xml:"Name"`
	Properties struct {
		LastModified  string `xml:"Last-Modified"`
		Etag          string `xml:"Etag"`
		ContentLength int    `xml:"Content-Length"`
		BlobType      string `xml:"BlobType"`
	} `xml:"Properties"`
}

// list answers List Blobs with every blob under prefix, in one page.
func list(w http.ResponseWriter, container, prefix string, blobs map[string][]byte) {
	e := enumeration{ContainerName: container, Prefix: prefix}
	for name, body := range blobs {
		if strings.HasPrefix(name, prefix) {
			i := item{Name: name}
			i.Properties.LastModified, i.Properties.Etag, i.Properties.ContentLength, i.Properties.BlobType = modified, "0x1", len(body), "BlockBlob"
			e.Blobs = append(e.Blobs, i)
		}
	}
	sort.Slice(e.Blobs, func(i, j int) bool { return e.Blobs[i].Name < e.Blobs[j].Name })
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(xml.Header))
	xml.NewEncoder(w).Encode(e)
}

// fail answers as the Blob service does: the error code in a header and in an XML body.
func fail(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	fmt.Fprintf(w, "%s<Error><Code>%s</Code><Message>%s</Message></Error>", xml.Header, code, message)
}
