package conf

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Set overrides one value by its dotted key ("store.segment_size",
// "broker.registries") with text as a command-line flag would give it:
// durations and sizes in their TOML string forms, booleans as true/false,
// lists comma-separated (a,b) or as a TOML array (["a","b"]). It does not validate ranges; call Validate after
// the last override.
func (f *File) Set(key, text string) error {
	section, name, ok := strings.Cut(key, ".")
	if !ok {
		return fmt.Errorf("%w: %q is not a key (want section.key, e.g. store.root)", ErrInvalid, key)
	}
	sv, ok := fieldByTag(reflect.ValueOf(f).Elem(), section)
	if !ok || sv.Kind() != reflect.Struct {
		return fmt.Errorf("%w: unknown section %q in key %q", ErrInvalid, section, key)
	}
	fv, ok := fieldByTag(sv, name)
	if !ok {
		return fmt.Errorf("%w: unknown key %q (known: %s)", ErrInvalid, key, strings.Join(Keys(section), ", "))
	}
	if err := setValue(fv, text); err != nil {
		return fmt.Errorf("%w: %s = %q: %v", ErrInvalid, key, text, err)
	}
	return nil
}

// knownKeysHint names what a file may hold where key was not known: the
// keys of its section, or the sections when the section itself is not
// one (`smartgo <cmd> -h` and conf/standalone.toml describe them).
func knownKeysHint(key toml.Key) string {
	if len(key) > 0 {
		if ks := Keys(key[0]); len(ks) > 0 {
			return "known in [" + key[0] + "]: " + strings.Join(ks, ", ")
		}
	}
	var sections []string
	t := reflect.TypeOf(File{})
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Type.Kind() == reflect.Struct {
			sections = append(sections, "["+t.Field(i).Tag.Get("toml")+"]")
		}
	}
	sort.Strings(sections)
	return "known sections: " + strings.Join(sections, ", ")
}

// Keys lists the settable keys of a section, sorted.
func Keys(section string) []string {
	f := File{}
	sv, ok := fieldByTag(reflect.ValueOf(&f).Elem(), section)
	if !ok {
		return nil
	}
	var keys []string
	t := sv.Type()
	for i := 0; i < t.NumField(); i++ {
		ft := t.Field(i).Type
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.String {
			continue // tables such as [[bridge.route]] are file-only
		}
		keys = append(keys, section+"."+t.Field(i).Tag.Get("toml"))
	}
	sort.Strings(keys)
	return keys
}

func fieldByTag(v reflect.Value, tag string) (reflect.Value, bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("toml") == tag {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func setValue(v reflect.Value, text string) error {
	switch p := v.Addr().Interface().(type) {
	case *Duration:
		return p.UnmarshalText([]byte(text))
	case *Size:
		return p.UnmarshalText([]byte(text))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(text)
	case reflect.Bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		v.SetInt(n)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("cannot be set from the command line; use the config file")
		}
		items, err := parseList(text)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("cannot be set from the command line; use the config file")
	}
	return nil
}

// parseList reads a list of strings given on the command line: a TOML
// array (["a", "b"], as the file writes it) or comma-separated words
// (a,b). Empty items are dropped; "" and [] are the empty list.
func parseList(text string) ([]string, error) {
	var items []string
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "[") {
		var doc struct {
			V []string `toml:"v"`
		}
		if _, err := toml.Decode("v = "+t, &doc); err != nil {
			return nil, fmt.Errorf(`want a TOML array of strings such as ["a", "b"], or a,b`)
		}
		for _, s := range doc.V {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, s)
			}
		}
		return items, nil
	}
	for _, s := range strings.Split(text, ",") {
		if s = strings.TrimSpace(s); s != "" {
			items = append(items, s)
		}
	}
	return items, nil
}
