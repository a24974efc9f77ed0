package devcluster

import (
	"net"
	"strconv"
	"testing"
)

// FreeAddr's ports are outside the kernel's ephemeral range, where a listen on port 0 or an
// outgoing connection elsewhere cannot take them, and free.
func TestFreeAddrIsOutsideTheEphemeralRange(t *testing.T) {
	lo, hi, ok := quietPorts()
	if !ok {
		t.Skipf("no room under the ephemeral range here (%d-%d)", lo, hi)
	}
	for range 20 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if port < lo || port >= hi {
			t.Fatalf("FreeAddr = %s, want a port in [%d, %d)", addr, lo, hi)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listening on FreeAddr's %s: %v", addr, err)
		}
		l.Close()
	}
}
