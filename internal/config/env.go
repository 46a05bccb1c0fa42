package config

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// ApplyEnv reads the environment variables of the table (RUST_LOG,
// KEEP_ALIVE_INTERVAL, MISTRALRS_API_KEY) into c; getenv nil means
// os.Getenv. A variable of a setting that also has a flag or TOML key only
// fills a value they left empty. A value that does not parse keeps the
// default and comes back as a warning, as in mistral.rs.
func (c *Config) ApplyEnv(getenv func(string) string) []Warning {
	if getenv == nil {
		getenv = os.Getenv
	}
	var w []Warning
	for i := range Options {
		o := &Options[i]
		if o.Env == "" {
			continue
		}
		v := getenv(o.Env)
		if v == "" {
			continue
		}
		switch p := o.field(c).(type) {
		case *string:
			if o.Key != "" && *p != "" {
				continue // set by a flag or the TOML file, which win
			}
			*p = v
		case *bool:
			if *p {
				continue // set by a flag or the TOML file
			}
			b, err := strconv.ParseBool(v)
			if err != nil {
				w = append(w, Warning{o.Env, fmt.Sprintf("invalid value %q (want true or false); using %v", v, o.Default)})
				continue
			}
			*p = b
		case *time.Duration:
			// Milliseconds, as mistral.rs reads KEEP_ALIVE_INTERVAL.
			ms, err := strconv.ParseUint(v, 10, 32)
			if err != nil || ms == 0 {
				w = append(w, Warning{o.Env, fmt.Sprintf("invalid value %q (want a positive number of milliseconds); using %v", v, o.Default)})
				continue
			}
			*p = time.Duration(ms) * time.Millisecond
		default:
			panic(fmt.Sprintf("config: no environment parser for %T (%s)", p, o.Env))
		}
	}
	return w
}
