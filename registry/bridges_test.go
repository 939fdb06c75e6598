package registry

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// callJSON invokes a request on addr with a JSON body.
func callJSON(t *testing.T, c *remoting.Client, addr string, code int32, body any) *protocol.Command {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = protocol.EncodeJSON(body); err != nil {
			t.Error(err)
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, addr, protocol.NewRequest(code, nil, b))
	if err != nil {
		t.Errorf("request %d: %v", code, err)
		return protocol.NewResponse(-1, err.Error())
	}
	return resp
}

func bridgeList(t *testing.T, c *remoting.Client, addr string) []protocol.BridgeInfo {
	t.Helper()
	resp := callJSON(t, c, addr, protocol.GetBridgeList, nil)
	var bl protocol.BridgeList
	if resp.Code != protocol.Success {
		t.Fatalf("bridge list: %d %s", resp.Code, resp.Remark)
	}
	if err := protocol.DecodeJSON(resp.Body, &bl); err != nil {
		t.Fatal(err)
	}
	return bl.Bridges
}

// TestRegistryBridgeNodes: a bridge node's heartbeat lists it with its
// counts; an admin call for it is relayed over the node's own connection
// and answered with the node's answer; an unknown node is QUERY_NOT_FOUND;
// a node whose connection breaks mid-call gets the caller a SYSTEM_ERROR
// at once and leaves the list.
func TestRegistryBridgeNodes(t *testing.T) {
	_, addr := startRegistry(t, Options{})
	node, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	block := make(chan struct{})
	reached := make(chan struct{}, 1)
	node.RegisterFunc(protocol.MQTTAdmin, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		var r protocol.MQTTAdminRequest
		if err := protocol.DecodeJSON(req.Body, &r); err != nil {
			return nil, err
		}
		if r.Op == "block" {
			reached <- struct{}{}
			<-block
		}
		resp := protocol.NewResponse(protocol.Success, "")
		resp.Body, _ = protocol.EncodeJSON(protocol.MQTTClientPage{Total: 1, Items: []protocol.MQTTClientInfo{{ClientID: "dev-" + r.Prefix, Node: r.Node}}})
		return resp, nil
	})
	adm, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()

	if resp := callJSON(t, node, addr, protocol.RegisterBridge, protocol.BridgeInfo{}); resp.Code != protocol.SystemError {
		t.Fatalf("heartbeat without node id: %d", resp.Code)
	}
	info := protocol.BridgeInfo{Node: "n1", Addrs: []string{"127.0.0.1:1883"}, Version: "v", Connections: 7, ClusterSessions: 9}
	if resp := callJSON(t, node, addr, protocol.RegisterBridge, info); resp.Code != protocol.Success {
		t.Fatalf("heartbeat: %d %s", resp.Code, resp.Remark)
	}
	bl := bridgeList(t, adm, addr)
	if len(bl) != 1 || bl[0].Node != "n1" || bl[0].Connections != 7 || bl[0].ClusterSessions != 9 || bl[0].LastUpdate == 0 {
		t.Fatalf("bridge list: %+v", bl)
	}

	resp := callJSON(t, adm, addr, protocol.MQTTAdmin, protocol.MQTTAdminRequest{Node: "n1", Op: protocol.MQTTOpClients, Prefix: "x"})
	var page protocol.MQTTClientPage
	if resp.Code != protocol.Success || protocol.DecodeJSON(resp.Body, &page) != nil || len(page.Items) != 1 || page.Items[0].ClientID != "dev-x" {
		t.Fatalf("relayed call: %d %s %+v", resp.Code, resp.Remark, page)
	}
	if resp := callJSON(t, adm, addr, protocol.MQTTAdmin, protocol.MQTTAdminRequest{Node: "n2", Op: protocol.MQTTOpClients}); resp.Code != protocol.QueryNotFound {
		t.Fatalf("unknown node: %d %s", resp.Code, resp.Remark)
	}
	if resp := callJSON(t, adm, addr, protocol.MQTTAdmin, nil); resp.Code != protocol.SystemError {
		t.Fatalf("empty body: %d", resp.Code)
	}

	// The node's connection breaks while it holds a call.
	done := make(chan *protocol.Command, 1)
	go func() {
		done <- callJSON(t, adm, addr, protocol.MQTTAdmin, protocol.MQTTAdminRequest{Node: "n1", Op: "block"})
	}()
	select { // the call reached the node
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("the relayed call never reached the node")
	}
	node.CloseConn(addr)
	select {
	case r := <-done:
		if r.Code != protocol.SystemError || !strings.Contains(r.Remark, "n1") {
			t.Fatalf("call to a node that went away: %d %q", r.Code, r.Remark)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer after the node's connection closed")
	}
	close(block)
	testutil.WaitFor(t, 5*time.Second, "node removed", func() bool { return len(bridgeList(t, adm, addr)) == 0 })

	// Unregister removes a node at once.
	callJSON(t, node, addr, protocol.RegisterBridge, info)
	if len(bridgeList(t, adm, addr)) != 1 {
		t.Fatal("node not back")
	}
	callJSON(t, node, addr, protocol.UnregisterBridge, protocol.BridgeInfo{Node: "n1"})
	if bl := bridgeList(t, adm, addr); len(bl) != 0 {
		t.Fatalf("after unregister: %+v", bl)
	}
}

// TestRegistryBridgeExpiry: a node silent longer than the expiry leaves
// the list.
func TestRegistryBridgeExpiry(t *testing.T) {
	s, addr := startRegistry(t, Options{ScanInterval: 20 * time.Millisecond, BrokerExpiry: 100 * time.Millisecond})
	c, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	callJSON(t, c, addr, protocol.RegisterBridge, protocol.BridgeInfo{Node: "quiet"})
	if s.bridges.len() != 1 {
		t.Fatal("not registered")
	}
	testutil.WaitFor(t, 5*time.Second, "expiry", func() bool { return s.bridges.len() == 0 })
}

// TestRegistryBridgeHeartbeatOnClosedConn: a bridge heartbeat that the
// registry handles after the connection it came on closed (a node that
// crashed with a heartbeat on its way) does not list the node. It used
// to list it again after the close had removed it, on a connection that
// is gone: the node stayed listed until BrokerExpiry (two minutes), and
// the other bridge nodes did not publish its clients' wills meanwhile.
func TestRegistryBridgeHeartbeatOnClosedConn(t *testing.T) {
	s, addr := startRegistry(t, Options{})
	for i := range 100 {
		body, err := protocol.EncodeJSON(protocol.BridgeInfo{Node: fmt.Sprint("crashed-", i)})
		if err != nil {
			t.Fatal(err)
		}
		frame, err := protocol.EncodeFrame(protocol.NewRequest(protocol.RegisterBridge, nil, body))
		if err != nil {
			t.Fatal(err)
		}
		sendAndClose(t, addr, frame)
	}
	testutil.WaitFor(t, 10*time.Second, "no node of a closed connection listed", func() bool { return s.bridges.len() == 0 })
}

// sendAndClose writes a request frame to addr on a new connection and
// closes it at once, without waiting for the answer.
func sendAndClose(t *testing.T, addr string, frame []byte) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
}
