package controller

import (
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// fsm is the raft.FSM: it decodes committed entries and applies them to
// the state under its lock; readers take copies.
type fsm struct {
	log *slog.Logger

	mu sync.RWMutex
	st *state // protected by mu
}

func newFSM(lg *slog.Logger) *fsm { return &fsm{log: lg, st: newState()} }

// Apply implements raft.FSM. It returns a result.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	c, err := decodeCommand(l.Data)
	if err != nil {
		// Every replica refuses the same entry the same way.
		f.log.Error("controller: undecodable log entry ignored", "index", l.Index, "err", err)
		return result{Code: protocol.ControllerInvalidRequest, Remark: err.Error()}
	}
	f.mu.Lock()
	r := f.st.apply(c)
	if r.Group != nil {
		r.Group = r.Group.clone()
	}
	f.mu.Unlock()
	return r
}

// group returns a copy of the named group, or nil.
func (f *fsm) group(name string) *groupState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if g := f.st.Groups[name]; g != nil {
		return g.clone()
	}
	return nil
}

// groups returns copies of every group, sorted by name.
func (f *fsm) groups() []*groupState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*groupState, 0, len(f.st.Groups))
	for _, n := range f.st.groupNames() {
		out = append(out, f.st.Groups[n].clone())
	}
	return out
}

// Snapshot implements raft.FSM.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := encodeState(f.st)
	if err != nil {
		return nil, err
	}
	return fsmSnapshot(b), nil
}

// Restore implements raft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxRecordSize+1))
	if err != nil {
		return fmt.Errorf("controller: read snapshot: %w", err)
	}
	if len(b) > maxRecordSize {
		return fmt.Errorf("%w: snapshot larger than %d bytes", ErrCorrupt, maxRecordSize)
	}
	st, err := decodeState(b)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	return nil
}

// fsmSnapshot is an encoded state (see doc.go).
type fsmSnapshot []byte

// Persist implements raft.FSMSnapshot.
func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("controller: write snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (fsmSnapshot) Release() {}
