// The input row span of templates whose invocations compute TM adjacent outputs of one row
// (shaders/conv2d_texel.comp, shaders/pool2d.comp): each input element the window taps of those
// outputs read in that row, loaded once. The including shader defines SPAN and declares the input:
// x_vec, an rgba32f imageBuffer (TEXEL 1: one gather per 4 floats, the fast read on software
// devices), or x_data, a storage buffer; and enables GL_EXT_control_flow_attributes. Planners insert
// this file at the shader's "// KILN_ROW_SPAN" line (vulkan::insert_row_span).

// Texels that cover SPAN floats from any offset 0-3 in the first.
#define SPAN_TEXELS ((SPAN + 6) / 4)

// span[s] = element iw_first + s of the input row that starts at float `row`, or `fill` where that
// is outside the row (0 <= iw < width) or the row outside the input (!row_ok).
void load_row_span(int row, int iw_first, int width, bool row_ok, float fill, out float span[SPAN]) {
#if TEXEL
  // Gathers the texels around the span, then shifts by the span's offset in its first texel (per
  // lane, so a select).
  const int start = row + iw_first;
  const int first_texel = start >> 2;  // arithmetic shift: floor, also below 0
  const int shift = start & 3;
  const int last_texel = imageSize(x_vec) - 1;
  float f[SPAN_TEXELS * 4];
  [[unroll]] for (int q = 0; q < SPAN_TEXELS; ++q) {
    const vec4 t = imageLoad(x_vec, clamp(first_texel + q, 0, last_texel));
    f[4 * q] = t.x; f[4 * q + 1] = t.y; f[4 * q + 2] = t.z; f[4 * q + 3] = t.w;
  }
  [[unroll]] for (int s = 0; s < SPAN; ++s) {
    const float v = shift == 0 ? f[s] : shift == 1 ? f[s + 1] : shift == 2 ? f[s + 2] : f[s + 3];
    const int iw = iw_first + s;
    span[s] = row_ok && iw >= 0 && iw < width ? v : fill;
  }
#else
  [[unroll]] for (int s = 0; s < SPAN; ++s) {
    const int iw = iw_first + s;
    const bool ok = row_ok && iw >= 0 && iw < width;
    const float v = x_data[ok ? row + iw : 0];
    span[s] = ok ? v : fill;
  }
#endif
}
