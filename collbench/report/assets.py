"""The report's inline style and scripts (kept here so the page builder stays about content).

``ERROR_TRAP_JS`` runs first, in ``<head>``: it records every uncaught error, rejected promise and
``console.error`` into ``#js-errors``, so a headless browser's DOM dump shows them (the test reads it).
``PAGE_JS`` makes tables with class ``sortable`` sort on a header click, then marks
``<body data-js="ready">``. Opened with ``#selftest``, it sorts every sortable table by each numeric
column and checks the order, writing failures into ``#js-errors`` too.
"""

from __future__ import annotations

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1240px;padding:0 16px}
body{color:#222}
header{border-bottom:2px solid #444;margin-bottom:8px}
nav a{margin-right:12px;font-size:13px}
h2{border-bottom:1px solid #ccc;margin-top:28px}
code{background:#f3f3f3;padding:0 3px}
.note{color:#555;font-size:13px}
.charts,.machine-view{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
svg text{font:11px system-ui,sans-serif;fill:#222}
svg .title{font-size:13px;font-weight:600}
svg .title-small{font-size:12px;font-weight:600}
svg .frame{fill:none;stroke:#888}
svg .grid{stroke:#e4e4e4}
svg .tick{fill:#555}
svg .model{fill:none;stroke-width:1.5;stroke-dasharray:6,4}
svg .measured{fill:none;stroke-width:1.2;stroke-opacity:.8}
svg .spread{stroke-width:1.2;stroke-opacity:.6}
svg .noisy{fill:none;stroke:#d00;stroke-width:1.6}
svg .marker{stroke:#555;stroke-dasharray:2,3}
svg .marker-label{font-size:10px;fill:#555}
svg .legend-note{font-size:10px;fill:#555}
svg .band{stroke:#fff;stroke-width:1}
svg .band-label{fill:#fff;font-weight:600}
svg .axis-line{stroke:#888}
svg .dev rect{fill:#fff;stroke:#333;stroke-width:1.5}
svg .nic rect{fill:#eee;stroke:#777}
svg .link-label{font-size:9px;fill:#444}
table{border-collapse:collapse;margin:8px 0;font-size:12px}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right}
th{background:#f5f5f5}
td:first-child,th:first-child{text-align:left}
table.sortable th[data-col]{cursor:pointer}
table.sortable th[data-dir=asc]::after{content:" \\25B2"}
table.sortable th[data-dir=desc]::after{content:" \\25BC"}
th[colspan]{text-align:center}
details.table summary{cursor:pointer;color:#1f4e9a;margin:6px 0}
table.matrix td{text-align:center;min-width:40px}
table.kv th{text-align:left}
table.kv td{text-align:left}
table.rules td,table.rules th{text-align:left;white-space:nowrap}
table.rules td.params{min-width:120px;white-space:normal}
table.rules td.evidence{min-width:220px;white-space:normal;color:#444}
.table-box{max-width:100%;overflow-x:auto}
table.kv td{overflow-wrap:anywhere}
#js-errors:empty{display:none}
#js-errors{color:#b00;border:1px solid #b00;padding:6px}
"""

ERROR_TRAP_JS = """
(function(){
  var errors=[];
  function show(){var el=document.getElementById('js-errors');if(el){el.textContent=errors.join('\\n');}}
  window.addEventListener('error',function(e){errors.push('error: '+e.message);show();});
  window.addEventListener('unhandledrejection',function(e){errors.push('rejection: '+String(e.reason));show();});
  var original=console.error;
  console.error=function(){errors.push('console.error: '+Array.prototype.join.call(arguments,' '));show();
    return original.apply(console,arguments);};
  window.collbenchErrors=function(){return errors;};
  window.collbenchShowErrors=show;
  window.collbenchRecord=function(m){errors.push(m);show();};
})();
"""

PAGE_JS = """
(function(){
  function key(cell){
    var v=cell.getAttribute('data-v');
    if(v===null){return {n:false,v:cell.textContent};}
    if(v===''){return {n:true,v:Infinity};}
    return {n:true,v:parseFloat(v)};
  }
  function sortBy(th,dir){
    var table=th.closest('table');var col=parseInt(th.getAttribute('data-col'),10);
    var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){
      var x=key(a.cells[col]),y=key(b.cells[col]);var c;
      if(x.n&&y.n){c=x.v===y.v?0:(x.v<y.v?-1:1);}else{c=String(x.v).localeCompare(String(y.v));}
      return dir==='asc'?c:-c;
    });
    rows.forEach(function(r){body.appendChild(r);});
    table.querySelectorAll('th[data-col]').forEach(function(h){h.removeAttribute('data-dir');});
    th.setAttribute('data-dir',dir);
  }
  document.querySelectorAll('table.sortable th[data-col]').forEach(function(th){
    th.addEventListener('click',function(){sortBy(th,th.getAttribute('data-dir')==='asc'?'desc':'asc');});
  });
  function selftest(){
    var checked=0;
    document.querySelectorAll('table.sortable').forEach(function(table){
      table.querySelectorAll('th[data-col]').forEach(function(th){
        var col=parseInt(th.getAttribute('data-col'),10);
        ['asc','desc'].forEach(function(dir){
          sortBy(th,dir);
          var vals=Array.prototype.map.call(table.tBodies[0].rows,function(r){return key(r.cells[col]);})
            .filter(function(k){return k.n&&isFinite(k.v);}).map(function(k){return k.v;});
          for(var i=1;i<vals.length;i++){
            if(dir==='asc'?vals[i]<vals[i-1]:vals[i]>vals[i-1]){
              window.collbenchRecord('selftest: column '+th.textContent+' not sorted '+dir);return;}
          }
          checked++;
        });
      });
    });
    document.body.setAttribute('data-selftest',String(checked));
  }
  if(location.hash==='#selftest'){selftest();}
  document.body.setAttribute('data-js','ready');
})();
"""


def table_box(table_html: str) -> str:
    """``table_html`` in a box as wide as the page: a table wider than the window scrolls sideways inside
    it, and the page itself never does (profile.html's rules at 1200 px ran 60 px past the window's edge)."""
    return f'<div class="table-box">{table_html}</div>'
