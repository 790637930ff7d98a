"""A real capture made story-sized: the trace's events repeated `k` times
one after another (timestamps shifted by the trace's span, correlation,
external, record-function and flow ids offset per copy, step numbers
renumbered), with every arg torch wrote kept. The generator writes fewer
args per event than torch does; this is how the benchmarks measure the
parse and its memory on what torch writes, at the size users profile
(BENCHMARKS.md, "Real-capture shape at story size").

    python3 python/captures/concat.py ../shared/traces/torch-h200-decode-fp8cast-78l-5xpool.json.gz 9 real9.json
"""
import json,gzip,sys
src,k,out=sys.argv[1],int(sys.argv[2]),sys.argv[3]
d=json.load(gzip.open(src))
ev=d['traceEvents']
ts=[e['ts'] for e in ev if 'ts' in e]
lo,hi=min(ts),max(e['ts']+e.get('dur',0) for e in ev if 'ts' in e)
span=hi-lo+1000
C=10**7
ID_KEYS=('correlation','External id','Record function id','Ev Idx','Python id','Python parent id')
outev=[]
for c in range(k):
    for e in ev:
        if c>0 and e.get('ph')=='M': continue
        e2=dict(e)
        if 'ts' in e2: e2['ts']=e2['ts']+c*span
        if 'id' in e2 and isinstance(e2['id'],int): e2['id']+=c*C
        a=e2.get('args')
        if isinstance(a,dict):
            a=dict(a)
            for key in ID_KEYS:
                if isinstance(a.get(key),int) and a[key]>0: a[key]+=c*C
            e2['args']=a
        if c>0 and isinstance(e2.get('name'),str) and e2['name'].startswith('ProfilerStep#'):
            n=int(e2['name'].split('#')[1]); e2['name']='ProfilerStep#%d'%(n+c*1000)
        outev.append(e2)
d['traceEvents']=outev
with open(out,'w') as f: json.dump(d,f)
print(len(outev))
