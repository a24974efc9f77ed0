package watchtrim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
)

// Cut is a member of an object that a JSON watch stream's events lose: the names leading to it
// from the object, "*" standing for every element of an array ("spec", "replicatedJobs", "*",
// "template").
type Cut []string

// managedFieldsCut goes from the object of every JSON watch event: every kiln cache drops it.
var managedFieldsCut = Cut{"metadata", "managedFields"}

// cuts is a tree of Cuts below an event: a member whose name maps to nil is cut, one that maps
// to a subtree is walked (an object's members, or under "*" an array's elements), the others
// are copied as they are.
type cuts map[string]cuts

// eventCuts is the tree of a stream's events: the cuts under the event's "object". A Cut is
// a constant of kiln's: one that names nothing, or ends in "*", is a mistake in the code.
func eventCuts(of []Cut) cuts {
	root := cuts{}
	for _, c := range append([]Cut{managedFieldsCut}, of...) {
		if len(c) == 0 || c[len(c)-1] == "*" {
			panic(fmt.Sprintf("watchtrim: %q cuts no member", c))
		}
		node := root
		path := append([]string{"object"}, c...)
		for i, name := range path {
			if i == len(path)-1 {
				node[name] = nil
				break
			}
			next, ok := node[name]
			if ok && next == nil {
				break // a member around it is cut already
			}
			if !ok {
				next = cuts{}
				node[name] = next
			}
			node = next
		}
	}
	return root
}

// jsonWatch says whether a response is a JSON watch stream (custom resources are watched in
// JSON): a watch request answered in application/json.
func jsonWatch(req *http.Request, contentType string) bool {
	media, _, err := mime.ParseMediaType(contentType)
	if err != nil || media != "application/json" {
		return false
	}
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// resourceOf is the group and resource a collection's URL path names:
// /api/v1/[namespaces/<ns>/]<resource> or /apis/<group>/<version>/[namespaces/<ns>/]<resource>.
func resourceOf(path string) schema.GroupResource {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		return schema.GroupResource{Resource: parts[len(parts)-1]}
	case len(parts) >= 4 && parts[0] == "apis":
		return schema.GroupResource{Group: parts[1], Resource: parts[len(parts)-1]}
	}
	return schema.GroupResource{}
}

// jsonReader hands out a JSON watch stream with each event trimmed. kube-apiserver writes an
// event as one line of compact JSON; a line that is not an event of that form (a value over
// several lines, a truncated one, one of maxEvent bytes or more) is handed out as it came, so
// what client-go reads is always the stream, or the stream with members cut.
type jsonReader struct {
	body    io.ReadCloser
	tree    cuts
	in      []byte // read; in[at:] is not yet taken for handing out
	at      int
	scanned int    // in[at:at+scanned] holds no line end
	passing bool   // the line being read is too long to trim: it goes out as it comes
	out     []byte // the trimmed line
	left    []byte // what is not yet handed out (in r.in or r.out)
	err     error  // what ended the stream
}

func (r *jsonReader) Read(p []byte) (int, error) {
	for len(r.left) == 0 {
		if line, ok := r.line(); ok {
			r.left = line
			break
		}
		if r.err != nil {
			if r.at < len(r.in) { // the end of the stream, unterminated: as it came
				r.left, r.at, r.scanned = r.in[r.at:], len(r.in), 0
				break
			}
			return 0, r.err
		}
		r.fill()
	}
	n := copy(p, r.left)
	r.left = r.left[n:]
	return n, nil
}

func (r *jsonReader) Close() error { return r.body.Close() }

// event is the next line of the stream, trimmed, for a reader that decodes the events itself
// (eventDecoder) rather than reading the stream (Read). A line of maxEvent bytes or more fails
// the watch, as client-go's decoder fails it; so does a stream that ends inside a line (cut
// off: kube-apiserver ends every event with a line end).
func (r *jsonReader) event() ([]byte, error) {
	for {
		passing := r.passing
		if line, ok := r.line(); ok {
			if passing || r.passing || len(line) > maxEvent {
				return nil, fmt.Errorf("a watch event of %d bytes or more: %w", maxEvent, streaming.ErrObjectTooLarge)
			}
			return line, nil
		}
		if r.err != nil {
			if r.at < len(r.in) && errors.Is(r.err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, r.err
		}
		r.fill()
	}
}

// line takes the next whole line out of r.in and returns it trimmed, or as it came. Of a line
// of maxEvent bytes or more it returns what r.in holds, as it came, up to the line's end.
func (r *jsonReader) line() ([]byte, bool) {
	rest := r.in[r.at:]
	end := bytes.IndexByte(rest[r.scanned:], '\n')
	if end < 0 {
		r.scanned = len(rest)
		if len(rest) > 0 && (r.passing || len(rest) >= maxEvent) {
			r.at, r.scanned, r.passing = len(r.in), 0, true
			return rest, true
		}
		return nil, false
	}
	end += r.scanned
	r.at, r.scanned = r.at+end+1, 0
	if r.passing || end >= maxEvent {
		r.passing = false
		return rest[:end+1], true
	}
	out, ok := trimValue(r.out[:0], rest[:end], r.tree)
	if !ok {
		return rest[:end+1], true
	}
	r.out = append(out, '\n')
	return r.out, true
}

// Sizes of a JSON stream's read buffer: it starts at startBuffer, doubles while a line does not
// fit in it with minRead to spare, and once grown past shrinkBuffer for a long line goes back to
// startBuffer when the line is out. kiln watches a dozen custom resources as JSON, most of them
// idle in a given cluster: at 64 KiB each the streams held 0.8 MB (docs/performance.md).
const (
	startBuffer  = 4 << 10
	minRead      = 1 << 10
	shrinkBuffer = 1 << 20
)

// fill reads what the body has into r.in, after what is left of it.
func (r *jsonReader) fill() {
	left := len(r.in) - r.at
	if cap(r.in) > shrinkBuffer && left < startBuffer {
		r.in = append(make([]byte, 0, startBuffer), r.in[r.at:]...)
	} else {
		r.in = r.in[:copy(r.in, r.in[r.at:])]
	}
	r.at = 0
	if free := cap(r.in) - len(r.in); free < minRead {
		r.in = append(r.in, make([]byte, max(startBuffer, len(r.in)))...)[:len(r.in)]
	}
	n, err := r.body.Read(r.in[len(r.in):cap(r.in)])
	r.in = r.in[:len(r.in)+n]
	r.err = err
}

// trimValue appends to dst the JSON value v, which must be an object, with the members tree
// names cut; false when v is not one whole object, or a member it would cut is not valid JSON
// (then dst is to be dropped). What it copies it copies as it came: a line that was not JSON
// is still not JSON once trimmed, and client-go refuses it as it would have.
func trimValue(dst, v []byte, tree cuts) ([]byte, bool) {
	dst, end, ok := trimObject(dst, v, skipSpace(v, 0), tree)
	return dst, ok && skipSpace(v, end) == len(v)
}

// trimObject appends the object starting at v[i] with tree's members cut and tree's subtrees
// walked, and returns where it ends.
func trimObject(dst, v []byte, i int, tree cuts) ([]byte, int, bool) {
	if i >= len(v) || v[i] != '{' {
		return dst, 0, false
	}
	dst = append(dst, '{')
	first := true
	i = skipSpace(v, i+1)
	if i < len(v) && v[i] == '}' {
		return append(dst, '}'), i + 1, true
	}
	for {
		keyStart := i
		keyEnd, ok := skipString(v, i)
		if !ok {
			return dst, 0, false
		}
		i = skipSpace(v, keyEnd)
		if i >= len(v) || v[i] != ':' {
			return dst, 0, false
		}
		valueStart := skipSpace(v, i+1)
		sub, named, ok := member(tree, v[keyStart:keyEnd])
		if !ok {
			return dst, 0, false
		}
		var valueEnd int
		switch {
		case named && sub == nil: // cut, once it is known to be JSON
			if valueEnd, ok = skipValue(v, valueStart); !ok || !json.Valid(v[valueStart:valueEnd]) {
				return dst, 0, false
			}
		default:
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, v[keyStart:keyEnd]...)
			dst = append(dst, ':')
			if dst, valueEnd, ok = trimMember(dst, v, valueStart, sub); !ok {
				return dst, 0, false
			}
		}
		var closed bool
		if i, closed, ok = following(v, valueEnd, '}'); !ok || closed {
			return append(dst, '}'), i, ok
		}
	}
}

// following reads what follows a member or an element ending at v[i]: a comma, then it returns
// where the next one starts, or close, then it returns where the object or array ends.
func following(v []byte, i int, close byte) (next int, closed, ok bool) {
	i = skipSpace(v, i)
	switch {
	case i >= len(v):
		return 0, false, false
	case v[i] == ',':
		return skipSpace(v, i+1), false, true
	case v[i] == close:
		return i + 1, true, true
	}
	return 0, false, false
}

// member is what tree says of the member of the quoted name: a name spelled with escapes is
// read as client-go's decoder reads it.
func member(tree cuts, quoted []byte) (sub cuts, named, ok bool) {
	name := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		var s string
		if err := json.Unmarshal(quoted, &s); err != nil {
			return nil, false, false
		}
		name = []byte(s)
	}
	if string(name) == "*" {
		return nil, false, true // "*" stands for an array's elements, not a member
	}
	sub, named = tree[string(name)]
	return sub, named, true
}

// trimMember appends the value at v[i]: walked when tree has members for it, as it is otherwise.
func trimMember(dst, v []byte, i int, tree cuts) ([]byte, int, bool) {
	if len(tree) > 0 && i < len(v) {
		if elem, ok := tree["*"]; ok && v[i] == '[' {
			return trimArray(dst, v, i, elem)
		}
		if v[i] == '{' {
			return trimObject(dst, v, i, tree)
		}
	}
	end, ok := skipValue(v, i)
	if !ok {
		return dst, 0, false
	}
	return append(dst, v[i:end]...), end, true
}

// trimArray appends the array at v[i] with each element walked by tree.
func trimArray(dst, v []byte, i int, tree cuts) ([]byte, int, bool) {
	dst = append(dst, '[')
	i = skipSpace(v, i+1)
	if i < len(v) && v[i] == ']' {
		return append(dst, ']'), i + 1, true
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		var ok, closed bool
		if dst, i, ok = trimMember(dst, v, i, tree); !ok {
			return dst, 0, false
		}
		if i, closed, ok = following(v, i, ']'); !ok || closed {
			return append(dst, ']'), i, ok
		}
	}
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// skipString returns where the string starting at v[i] ends (after its closing quote).
func skipString(v []byte, i int) (int, bool) {
	if i >= len(v) || v[i] != '"' {
		return 0, false
	}
	for i++; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// skipValue returns where the value starting at v[i] ends. It follows strings and the depth of
// brackets, not the rest of the grammar: a value it copies, client-go's decoder still reads,
// and refuses if it is not JSON; a value to be cut is checked whole (trimObject).
func skipValue(v []byte, i int) (int, bool) {
	if i >= len(v) {
		return 0, false
	}
	switch v[i] {
	case '"':
		return skipString(v, i)
	case '{', '[':
		depth := 0
		for ; i < len(v); i++ {
			switch v[i] {
			case '"':
				end, ok := skipString(v, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	start := i
	for ; i < len(v); i++ { // a number, true, false or null
		switch v[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i, i > start
		case '"', '{', '[', ':':
			return 0, false
		}
	}
	return i, i > start
}
