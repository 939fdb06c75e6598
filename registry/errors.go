package registry

import "errors"

// Sentinel errors. Callers test with errors.Is.
var (
	// ErrBadOptions reports invalid Options.
	ErrBadOptions = errors.New("registry: invalid options")
	// ErrKVConfig reports a KV config file that cannot be read or parsed.
	ErrKVConfig = errors.New("registry: bad kv config file")
)
