package twin

import (
	"fmt"
	"io"
	"strings"
)

// Defaults for Options.
const (
	DefaultMaxModulesPerDevice = 50
	DefaultMaxPageSize         = 1000
)

// Options configures an Engine. The zero value is usable.
//
// MaxModulesPerDevice and IndexPaths shape what Apply decides or builds,
// so every replica applying the same log must use the same values.
type Options struct {
	// MaxModulesPerDevice bounds the module identities of one device
	// (default 50, IoT Hub's limit).
	MaxModulesPerDevice int
	// IndexPaths are property paths ("properties.reported.fw.version",
	// "properties.desired.mode") indexed for queries' = and IN besides
	// the ones always indexed (every scalar leaf of tags, status and
	// connectionState). A path must start with properties.desired. or
	// properties.reported.
	IndexPaths []string
	// MaxPageSize bounds the items one list or query page returns
	// (default 1000).
	MaxPageSize int
	// Rand is where Prepare draws generated SAS keys and generation ids
	// (nil: crypto/rand). Tests pass a fixed source.
	Rand io.Reader
}

// DefaultOptions returns the options with every default filled in.
func DefaultOptions() Options {
	o := Options{}
	o.setDefaults()
	return o
}

// Validate reports the first invalid field.
func (o *Options) Validate() error {
	if o.MaxModulesPerDevice < 0 || o.MaxModulesPerDevice > 10000 {
		return fmt.Errorf("%w: MaxModulesPerDevice %d not in 0..10000", ErrBadOptions, o.MaxModulesPerDevice)
	}
	if o.MaxPageSize < 0 {
		return fmt.Errorf("%w: negative MaxPageSize", ErrBadOptions)
	}
	for _, p := range o.IndexPaths {
		if !strings.HasPrefix(p, "properties.desired.") && !strings.HasPrefix(p, "properties.reported.") {
			return fmt.Errorf("%w: index path %q must start with properties.desired or properties.reported", ErrBadOptions, p)
		}
		for _, seg := range strings.Split(p, ".")[2:] {
			if err := checkKey(seg, p); err != nil {
				return fmt.Errorf("%w: index path %q: %s", ErrBadOptions, p, err.Msg)
			}
		}
	}
	return nil
}

func (o *Options) setDefaults() {
	if o.MaxModulesPerDevice == 0 {
		o.MaxModulesPerDevice = DefaultMaxModulesPerDevice
	}
	if o.MaxPageSize == 0 {
		o.MaxPageSize = DefaultMaxPageSize
	}
}
