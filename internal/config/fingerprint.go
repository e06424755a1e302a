package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"reflect"
	"sort"
	"time"
)

// Fingerprint hashes the configuration but for what may differ between
// the nodes of one cluster (the cluster section, api.listen, and how each
// reaches the metadata store): nodes compare fingerprints so that none runs
// another configuration (docs/cluster.md).
func (c *Config) Fingerprint() string {
	cp := *c
	cp.Cluster, cp.API.Listen, cp.Metadata = nil, "", ""
	h := sha256.New()
	walk(h, reflect.ValueOf(cp), "")
	return hex.EncodeToString(h.Sum(nil))[:16]
}

var (
	locationType = reflect.TypeFor[*time.Location]()
	timeType     = reflect.TypeFor[time.Time]()
)

// walk writes every value under v, with its path, to h.
func walk(h hash.Hash, v reflect.Value, path string) {
	switch {
	case !v.IsValid():
		return
	case v.Type() == locationType:
		if !v.IsNil() {
			fmt.Fprintf(h, "%s=%s\n", path, v.Interface().(*time.Location).String())
		}
		return
	case v.Type() == timeType:
		fmt.Fprintf(h, "%s=%s\n", path, v.Interface().(time.Time).Format(time.RFC3339Nano))
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walk(h, v.Elem(), path)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walk(h, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			walk(h, v.MapIndex(k), fmt.Sprintf("%s[%v]", path, k))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				walk(h, v.Field(i), path+"."+f.Name)
			}
		}
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
	default:
		fmt.Fprintf(h, "%s=%v\n", path, v.Interface())
	}
}
