package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Lenient body decoding.
//
// RocketMQ's brokers decode bodies with fastjson, which converts between
// JSON scalars where the target field's type asks for it: a number sent as
// a string ("2598919" for an int), a number for a string field, "true" or
// 1 for a boolean. Clients rely on it: rocketmq-client-go v2.1.2 writes a
// subscription's codeSet as strings (["2598919"]), which encoding/json
// refuses for []int32. DecodeJSON first decodes strictly (the fast path);
// only when that fails on a type mismatch does it retry through
// decodeLenient, which rewrites each scalar to the kind the target field
// wants and decodes again.
//
// The conversions, by target kind:
//
//	integer  "123", " 123 ", "1.0", 1.0, "1e3"  -> the integer; "" -> absent;
//	         true/false -> 1/0
//	float    "1.5" -> 1.5; "" -> absent; true/false -> 1/0
//	string   123 -> "123"; true -> "true"
//	bool     "true"/"false" (any case), "1"/"0", "Y"/"N", "T"/"F", numbers
//	         (0 is false)
//
// Everything else (objects for scalars, unparsable text, out-of-range
// numbers) is left as it is, and the strict decoder's error is returned.

// decodeLenient decodes b into v (a non-nil pointer) with the conversions
// above. It returns false when b is not JSON or still does not fit v.
func decodeLenient(b []byte, v any) bool {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return false
	}
	t := rv.Type().Elem()
	fixed, err := json.Marshal(coerceJSON(tree, t))
	if err != nil {
		return false
	}
	fresh := reflect.New(t)
	if err := json.Unmarshal(fixed, fresh.Interface()); err != nil {
		return false
	}
	rv.Elem().Set(fresh.Elem())
	return true
}

var jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// coerceJSON rewrites the decoded JSON value x (maps, slices, strings,
// json.Number, bools, nil) in place where its scalars do not fit t, and
// returns the result.
func coerceJSON(x any, t reflect.Type) any {
	if x == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// A type that parses itself (MQMap) gets its JSON unchanged.
	if t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		return x
	}
	switch t.Kind() {
	case reflect.Struct:
		if m, ok := x.(map[string]any); ok {
			fields := structFields(t)
			for k, val := range m {
				if ft, ok := fields.lookup(k); ok {
					m[k] = coerceJSON(val, ft)
				}
			}
		}
	case reflect.Map:
		if m, ok := x.(map[string]any); ok {
			for k, val := range m {
				m[k] = coerceJSON(val, t.Elem())
			}
		}
	case reflect.Slice, reflect.Array:
		if a, ok := x.([]any); ok {
			for i := range a {
				a[i] = coerceJSON(a[i], t.Elem())
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return coerceInteger(x)
	case reflect.Float32, reflect.Float64:
		return coerceFloat(x)
	case reflect.String:
		switch y := x.(type) {
		case json.Number:
			return string(y)
		case bool:
			return strconv.FormatBool(y)
		}
	case reflect.Bool:
		return coerceBool(x)
	}
	return x
}

// coerceInteger turns numeric text and integral floats into an integer
// json.Number.
func coerceInteger(x any) any {
	var s string
	switch y := x.(type) {
	case bool:
		return boolNumber(y)
	case string:
		s = strings.TrimSpace(y)
		if s == "" {
			return nil
		}
	case json.Number:
		s = string(y)
	default:
		return x
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return json.Number(s)
	}
	if _, err := strconv.ParseUint(s, 10, 64); err == nil {
		return json.Number(s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<63 {
		return x
	}
	return json.Number(strconv.FormatFloat(f, 'f', 0, 64))
}

func coerceFloat(x any) any {
	switch y := x.(type) {
	case bool:
		return boolNumber(y)
	case string:
		s := strings.TrimSpace(y)
		if s == "" {
			return nil
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return json.Number(s)
		}
	}
	return x
}

// boolNumber is fastjson's number for a boolean: 1 or 0.
func boolNumber(b bool) json.Number {
	if b {
		return "1"
	}
	return "0"
}

func coerceBool(x any) any {
	switch y := x.(type) {
	case string:
		switch strings.ToLower(strings.TrimSpace(y)) {
		case "true", "1", "y", "t":
			return true
		case "false", "0", "n", "f":
			return false
		case "":
			return nil
		}
	case json.Number:
		f, err := y.Float64()
		if err == nil {
			return f != 0
		}
	}
	return x
}

// jsonFields maps the JSON keys of a struct's fields to their types, the
// way encoding/json matches them: exact key first, then case-insensitive.
type jsonFields struct {
	exact map[string]reflect.Type
	fold  map[string]reflect.Type
}

func (f *jsonFields) lookup(key string) (reflect.Type, bool) {
	if t, ok := f.exact[key]; ok {
		return t, true
	}
	t, ok := f.fold[strings.ToLower(key)]
	return t, ok
}

var fieldCache sync.Map // reflect.Type -> *jsonFields

func structFields(t reflect.Type) *jsonFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*jsonFields)
	}
	f := &jsonFields{exact: map[string]reflect.Type{}, fold: map[string]reflect.Type{}}
	addStructFields(f, t, 0)
	fieldCache.Store(t, f)
	return f
}

func addStructFields(f *jsonFields, t reflect.Type, depth int) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct && depth < 8 {
				addStructFields(f, et, depth+1)
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := f.exact[name]; !dup {
			f.exact[name] = sf.Type
		}
		if _, dup := f.fold[strings.ToLower(name)]; !dup {
			f.fold[strings.ToLower(name)] = sf.Type
		}
	}
}
