package config

import (
	"reflect"
	"strings"
	"testing"

	"mistralrs/internal/engine"
)

// TestEngineOptionsMapped: every field of engine.Options but Draft (a loaded
// model, set by the server) takes its value from a [runtime] or [paged_attn]
// setting of the table, so that no engine default is written anywhere else. Each setting is changed alone; every
// field must be changed by one of them.
func TestEngineOptionsMapped(t *testing.T) {
	base := Default().EngineOptions()
	changed := map[string]string{} // field -> the setting that moved it
	for i, o := range Options {
		if !strings.HasPrefix(o.Key, "runtime.") && !strings.HasPrefix(o.Key, "paged_attn.") {
			continue
		}
		cfg := Default()
		ptr := reflect.ValueOf(o.field(cfg)).Elem()
		if !setOther(ptr, i) {
			t.Fatalf("%s: cannot set a %s", o.Key, ptr.Type())
		}
		got := reflect.ValueOf(cfg.EngineOptions())
		for f := range got.NumField() {
			if !got.Field(f).Equal(reflect.ValueOf(base).Field(f)) {
				changed[got.Type().Field(f).Name] = o.Key
			}
		}
	}
	// Draft is the one exception: a loaded model, not a setting. The server
	// loads each model's draft (runtime.mtp_model or the entry's own) and sets it.
	notSettings := map[string]bool{"Draft": true}
	typ := reflect.TypeFor[engine.Options]()
	for f := range typ.NumField() {
		name := typ.Field(f).Name
		if notSettings[name] {
			if changed[name] != "" {
				t.Errorf("engine.Options.%s is set by %s, but is listed as no setting's", name, changed[name])
			}
			continue
		}
		if changed[name] == "" {
			t.Errorf("engine.Options.%s is set by no setting of the table", name)
		} else {
			t.Logf("%s <- %s", name, changed[name])
		}
	}
	// The defaults reach the engine as the table writes them.
	if o := DefaultEngineOptions(); o.MaxSeqs != 32 || o.MaxNumBatchedTokens != 4096 || o.MaxDecodeStepsBeforePrefill != 8 ||
		o.BlockSize != 32 || o.PrefixCacheN != 16 || o.MemoryFraction != DefaultMemoryFraction ||
		o.SpecTokens != 4 || o.SpecNgram != 0 || o.Draft != nil || o.EncoderCacheBytes != 256<<20 {
		t.Errorf("default engine options %+v", o)
	}
}

// setOther stores in v a value unlike its default (seeded by i so that two
// settings never agree by chance).
func setOther(v reflect.Value, i int) bool {
	switch v.Kind() {
	case reflect.Int:
		v.SetInt(v.Int() + 1000 + int64(i))
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.String:
		v.SetString(v.String() + "-other")
	case reflect.Float64:
		v.SetFloat(v.Float()/2 + 0.001*float64(i))
	case reflect.Pointer:
		n := reflect.New(v.Type().Elem())
		if !setOther(n.Elem(), i) {
			return false
		}
		if n.Elem().Kind() == reflect.Float64 {
			n.Elem().SetFloat(0.25 + 0.001*float64(i))
		}
		v.Set(n)
	default:
		return false
	}
	return true
}
