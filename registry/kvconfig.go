package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/smartgo/smartgo/internal/fsutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// kvFile is the KV config file: {"configTable":{"<namespace>":{"<key>":"<value>"}}},
// the same shape as Java's kvConfig.json.
type kvFile struct {
	ConfigTable map[string]map[string]string `json:"configTable"`
}

// kvStore holds namespaced key/values, persisted after every change when a
// path is set.
type kvStore struct {
	path string

	mu    sync.RWMutex
	table map[string]map[string]string // protected by mu
}

func openKV(path string) (*kvStore, error) {
	kv := &kvStore{path: path, table: make(map[string]map[string]string)}
	if path == "" {
		return kv, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("registry: kv config dir: %w", err)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return kv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKVConfig, path, err)
	}
	var f kvFile
	if err := protocol.DecodeJSONObject(data, &f); err != nil { // "null" used to load as no config
		return nil, fmt.Errorf("%w: %s: %w", ErrKVConfig, path, err)
	}
	for ns, m := range f.ConfigTable {
		if m != nil {
			kv.table[ns] = m
		}
	}
	return kv, nil
}

func (kv *kvStore) get(ns, key string) (string, bool) {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	v, ok := kv.table[ns][key]
	return v, ok
}

// list returns a copy of a namespace, or nil if it does not exist.
func (kv *kvStore) list(ns string) map[string]string {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	m := kv.table[ns]
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (kv *kvStore) put(ns, key, value string) error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	m := kv.table[ns]
	if m == nil {
		m = make(map[string]string)
		kv.table[ns] = m
	}
	m[key] = value
	return kv.persistLocked()
}

func (kv *kvStore) delete(ns, key string) error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	m := kv.table[ns]
	if _, ok := m[key]; !ok {
		return nil
	}
	delete(m, key)
	if len(m) == 0 {
		delete(kv.table, ns)
	}
	return kv.persistLocked()
}

func (kv *kvStore) persistLocked() error {
	if kv.path == "" {
		return nil
	}
	data, err := protocol.EncodeJSON(kvFile{ConfigTable: kv.table})
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(kv.path, data, 0o644); err != nil {
		return fmt.Errorf("registry: persist kv config: %w", err)
	}
	return nil
}
