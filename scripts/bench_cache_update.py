"""Benchmark: three ways to write one position of a [b, L, h, d] decode cache inside a
tf.while_loop (one-hot where, scatter, XLA dynamic-update-slice), with and without XLA.

    python scripts/bench_cache_update.py
"""
import time, tensorflow as tf
b,L,h,d=32,128,8,64
cache=tf.zeros([b,L,h,d]); new=tf.random.normal([b,1,h,d])
def onehot(c,s,n):
    m=tf.reshape(tf.equal(tf.range(L),s),[1,L,1,1]); return tf.where(m,n,c)
def scatter(c,s,n):
    idx=tf.stack([tf.range(b),tf.fill([b],s)],1); return tf.tensor_scatter_nd_update(c,idx,n[:,0])
def dus(c,s,n):
    from tensorflow.compiler.tf2xla.python import xla
    return xla.dynamic_update_slice(c,n,tf.stack([0,s,0,0]))
for name,f in [("onehot",onehot),("scatter",scatter),("dus",dus)]:
    for jit in (False,True):
        @tf.function(jit_compile=jit)
        def loop(c):
            def body(i,c): return i+1, f(c,i,new+tf.cast(i,tf.float32))
            return tf.while_loop(lambda i,c:i<L, body,(0,c))[1]
        try:
            r=loop(cache); t=time.time(); r=loop(cache); r.numpy(); print(name,jit,time.time()-t, float(tf.reduce_sum(r)))
        except Exception as e: print(name,jit,"ERR",type(e).__name__, str(e)[:100])
