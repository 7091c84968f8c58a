/* Does this compiler keep every store of a 64-byte AMX tile configuration that is handed to
 * _tile_loadconfig? ggml's AMX matmul (ggml-cpu/amx/mmq.cpp, ggml_tile_config_init) fills a
 * zeroed struct like this one and loads it. Build with `cc -O2 -mamx-tile -c` and read the
 * object's disassembly (run.sh): a compiler that sees only 8 bytes read by the load drops the
 * rows/colsb stores as dead, and ldtilecfg then reads whatever was on the stack. */
#include <immintrin.h>
#include <stdint.h>

struct tile_config {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

void config_tiles(void) {
    struct tile_config tc __attribute__((aligned(64))) = {0};
    tc.palette_id = 1;
    for (int i = 0; i < 8; i++) {
        tc.rows[i] = 16;
        tc.colsb[i] = 64;
    }
    _tile_loadconfig(&tc);
}
