// The 16 levels of IQ4_NL / IQ4_XS (src/quant/blocks.hpp's kIq4nlValues).
const float kIq4nlValues[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                         1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
