{{/*
A TOML writer for the config file. Helm's toToml writes every number of the values as a float
(256.0), which the config loader refuses for integer keys, so this one writes whole numbers as
integers (a float key such as rrf_k accepts an integer too). Null values are left out.
*/}}

{{- define "thinkus-lib.toml.key" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . -}}{{ . }}{{- else -}}{{ include "thinkus-lib.toml.value" . }}{{- end -}}
{{- end -}}

{{- define "thinkus-lib.toml.isTableArray" -}}
{{- if and (kindIs "slice" .) (gt (len .) 0) -}}
{{- $all := true -}}
{{- range . -}}{{- if not (kindIs "map" .) -}}{{- $all = false -}}{{- end -}}{{- end -}}
{{- if $all -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{- define "thinkus-lib.toml.value" -}}
{{- $x := . -}}
{{- if kindIs "string" $x -}}
"{{ $x | replace "\\" "\\\\" | replace "\"" "\\\"" | replace "\n" "\\n" | replace "\r" "\\r" | replace "\t" "\\t" }}"
{{- else if kindIs "bool" $x -}}
{{- $x -}}
{{- else if or (kindIs "float64" $x) (kindIs "float32" $x) -}}
{{- if eq (floor $x) (float64 $x) -}}{{- int64 $x -}}{{- else -}}{{- $x -}}{{- end -}}
{{- else if or (kindIs "int" $x) (kindIs "int64" $x) (kindIs "int32" $x) (kindIs "uint64" $x) -}}
{{- $x -}}
{{- else if kindIs "slice" $x -}}
[{{- range $i, $e := $x -}}{{- if $i }}, {{ end -}}{{- include "thinkus-lib.toml.value" $e -}}{{- end -}}]
{{- else if kindIs "map" $x -}}
{ {{- range $i, $k := keys $x | sortAlpha -}}{{- if $i }},{{ end }} {{ include "thinkus-lib.toml.key" $k }} = {{ include "thinkus-lib.toml.value" (index $x $k) -}}{{- end }} }
{{- else -}}
{{- fail (printf "config: cannot write %v (%s) as TOML" $x (kindOf $x)) -}}
{{- end -}}
{{- end -}}

{{/* A table's body, then its sub-tables: (list "dotted.path" map). */}}
{{- define "thinkus-lib.toml.table" -}}
{{- $path := index . 0 -}}
{{- $t := index . 1 -}}
{{- $keys := keys $t | sortAlpha -}}
{{- range $k := $keys -}}
{{- $x := index $t $k -}}
{{- if not (or (kindIs "invalid" $x) (kindIs "map" $x) (include "thinkus-lib.toml.isTableArray" $x)) }}
{{ include "thinkus-lib.toml.key" $k }} = {{ include "thinkus-lib.toml.value" $x }}
{{- end -}}
{{- end -}}
{{- range $k := $keys -}}
{{- $x := index $t $k -}}
{{- $p := include "thinkus-lib.toml.key" $k -}}
{{- if $path -}}{{- $p = printf "%s.%s" $path $p -}}{{- end -}}
{{- if kindIs "map" $x }}

[{{ $p }}]
{{- include "thinkus-lib.toml.table" (list $p $x) -}}
{{- else if include "thinkus-lib.toml.isTableArray" $x -}}
{{- range $e := $x }}

[[{{ $p }}]]
{{- include "thinkus-lib.toml.table" (list $p $e) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "thinkus-lib.toml" -}}
{{- include "thinkus-lib.toml.table" (list "" .) | trim -}}
{{- end -}}
