# Compresses and decompresses 1 MiB of generated text with zlib; prints nothing (a deterministic
# python3 workload for the strace comparison).
import zlib

data = b"".join(b"line %d value %d\n" % (i, i * 7919 % 10007) for i in range(50000))
packed = zlib.compress(data, 6)
assert zlib.decompress(packed) == data
