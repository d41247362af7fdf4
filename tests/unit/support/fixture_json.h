/* Test support: fixture files and a minimal reader of smartctl's JSON output (objects, arrays,
 * strings, numbers, booleans; paths like "ata_smart_attributes.table[3].raw.value"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads FIXTURES/smart/name into buf; returns its size (fails the test if missing or larger). */
size_t fixture_load(const char *name, void *buf, size_t size);
/* The value at path, or NULL. */
const char *js_find(const char *json, const char *path);
/* The number, string or boolean at path (fails the test when absent). */
uint64_t js_u64(const char *json, const char *path);
const char *js_str(const char *json, const char *path, char *out, size_t size);
bool js_bool(const char *json, const char *path);
