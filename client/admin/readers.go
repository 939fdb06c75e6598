package admin

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// Reading the cluster's configuration and progress while part of it is
// down: the calls the console lists with (topics, groups, a group's
// members and progress) ask every broker group at once, read a group
// whose master is gone from its slave, and answer with what the others
// returned when some do not answer.

// ErrPartial marks an answer read from only some broker groups: the
// others did not answer (dead, hung or unreachable). The error names them;
// the answer that comes with it holds what the others returned.
var ErrPartial = errors.New("admin: some broker groups did not answer")

// partialError is ErrPartial with the errors of the broker groups that
// did not answer, and the names of those that did.
type partialError struct {
	errs     []error
	answered []string
}

// Answered returns the broker groups that answered, by name, when err is
// an ErrPartial error of this package (nil otherwise): those a write such
// as CreateTopic or DeleteTopic was applied on.
func Answered(err error) []string {
	var pe *partialError
	if !errors.As(err, &pe) {
		return nil
	}
	return slices.Clone(pe.answered)
}

func (e *partialError) Error() string {
	msgs := make([]string, len(e.errs))
	for i, err := range e.errs {
		msgs[i] = err.Error()
	}
	return ErrPartial.Error() + ": " + strings.Join(msgs, "; ")
}

func (e *partialError) Unwrap() []error { return append([]error{ErrPartial}, e.errs...) }

// Readers returns, for every broker group of every cluster, the broker to
// read its configuration, offsets and consumers from: its master, else
// (the master died or is being replaced) its slave with the lowest id,
// which keeps copies of the master's topics, groups and offsets. Sorted by
// broker name.
func (a *Admin) Readers(ctx context.Context) ([]Broker, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var out []Broker
	for cl, names := range ci.ClusterAddrTable {
		for _, n := range names {
			if bd := ci.BrokerAddrTable[n]; bd != nil {
				if addr := readAddr(bd); addr != "" {
					out = append(out, Broker{Cluster: cl, Name: n, Addr: addr})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil, client.ErrNoRoute
	}
	return out, nil
}

// readAddr is a broker group's master, else its slave with the lowest id,
// else "".
func readAddr(bd *protocol.BrokerData) string {
	if addr := bd.MasterAddr(); addr != "" {
		return addr
	}
	best, addr := int64(-1), ""
	for id, a := range bd.BrokerAddrs {
		if a != "" && id > protocol.MasterID && (best < 0 || id < best) {
			best, addr = id, a
		}
	}
	return addr
}

// fromEach sends a request (newReq makes one per broker) to every broker
// of bs at once and hands each answer to each, one at a time in the order
// of bs. A broker that does not answer, or whose answer each refuses with
// an error, counts as failed: fromEach returns nil when none failed, a
// partialError (ErrPartial) when some did, and the failures joined when
// all did.
func (a *Admin) fromEach(ctx context.Context, op string, bs []Broker, newReq func() *protocol.Command, each func(Broker, *protocol.Command) error) error {
	resps := make([]*protocol.Command, len(bs))
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = a.invoke(ctx, op, b.Addr, newReq())
		}()
	}
	wg.Wait()
	var failed []error
	var answered []string
	for i, b := range bs {
		if errs[i] == nil {
			errs[i] = each(b, resps[i])
		}
		if errs[i] != nil {
			failed = append(failed, errs[i])
		} else {
			answered = append(answered, b.Name)
		}
	}
	switch {
	case len(failed) == 0:
		return nil
	case len(failed) == len(bs):
		return errors.Join(failed...)
	}
	return &partialError{errs: failed, answered: answered}
}

// okAnswer returns a BrokerError unless resp is a success.
func okAnswer(op, addr string, resp *protocol.Command) error {
	if resp.Code != protocol.Success {
		return &client.BrokerError{Addr: addr, Op: op, Code: resp.Code, Remark: resp.Remark}
	}
	return nil
}

// fromReplica reads the record at commitlog offset off from every broker
// the registries list and returns the one stored by host: a slave's log is
// a byte copy of its master's, so after a failover the promoted slave (or
// any replica) holds the dead master's record at the same offset with the
// master's store host. Any other broker's record there has another store
// host (or none starts there); nil when no broker has it. It also
// returns the name of the broker group that holds it.
func (a *Admin) fromReplica(ctx context.Context, host netip.AddrPort, off int64) (*client.MessageExt, string) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, ""
	}
	for name, bd := range ci.BrokerAddrTable {
		for _, addr := range bd.BrokerAddrs {
			if addr == "" || addr == host.String() {
				continue
			}
			resp, err := a.invokeOK(ctx, "view message", addr, protocol.NewRequest(protocol.ViewMessageByID, &protocol.ViewMessageRequestHeader{Offset: off}, nil))
			if err != nil {
				continue
			}
			msgs, err := client.DecodeMessages(resp.Body, name)
			if err == nil && len(msgs) > 0 && msgs[0].StoreHost == host && msgs[0].CommitLogOffset == off {
				return msgs[0], name
			}
		}
	}
	return nil, ""
}
