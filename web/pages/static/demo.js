/* chatq demo: submit a chat job, then long-poll its events; or, with "Background response",
 * create an OpenAI background response and long-poll it until it ends.
 * Plain ES5 and XMLHttpRequest only, so that it runs in any browser. */
(function () {
  'use strict';

  var KEY_ITEM = 'chatq.demo.key';
  var WAIT_S = 25;
  var REQUEST_TIMEOUT_MS = (WAIT_S + 20) * 1000;
  var MAX_RETRIES = 6;
  var TERMINAL = { completed: true, failed: true, cancelled: true, incomplete: true };
  var TRANSIENT = { 0: true, 429: true, 502: true, 503: true, 504: true };

  var ui = {};
  var current = null; // the turn being shown: {prompt, jobId, text, status, active, api}

  function byId(id) {
    return document.getElementById(id);
  }

  function camel(id) {
    return id.replace(/-([a-z])/g, function (match, letter) {
      return letter.toUpperCase();
    });
  }

  function show(node, visible) {
    node.hidden = !visible;
    node.style.display = visible ? '' : 'none'; // for browsers without the hidden attribute
  }

  function storageGet(name) {
    try {
      return window.localStorage ? window.localStorage.getItem(name) || '' : '';
    } catch (e) {
      return '';
    }
  }

  function storageSet(name, value) {
    try {
      if (!window.localStorage) {
        return;
      }
      if (value) {
        window.localStorage.setItem(name, value);
      } else {
        window.localStorage.removeItem(name);
      }
    } catch (e) {
      // Private mode or storage disabled: the key is simply not remembered.
    }
  }

  function parseJson(text) {
    try {
      return JSON.parse(text);
    } catch (e) {
      return null;
    }
  }

  /* One HTTP exchange; calls done(status, body) once, status 0 for a network failure. */
  function request(method, url, key, body, done) {
    var xhr = new XMLHttpRequest();
    var finished = false;
    function finish(status, data) {
      if (!finished) {
        finished = true;
        done(status, data, xhr);
      }
    }
    xhr.open(method, url, true);
    xhr.setRequestHeader('Authorization', 'Bearer ' + key);
    xhr.setRequestHeader('Accept', 'application/json');
    try {
      xhr.timeout = REQUEST_TIMEOUT_MS;
    } catch (e) {
      // Old browsers have no XHR timeout; the server ends every wait anyway.
    }
    xhr.onreadystatechange = function () {
      if (xhr.readyState === 4) {
        finish(xhr.status, parseJson(xhr.responseText));
      }
    };
    xhr.ontimeout = function () {
      finish(0, null);
    };
    if (body === null) {
      xhr.send();
    } else {
      xhr.setRequestHeader('Content-Type', 'application/json');
      xhr.send(JSON.stringify(body));
    }
  }

  function errorText(status, data) {
    if (data && data.error && data.error.message) {
      return data.error.message + ' (HTTP ' + status + ')';
    }
    if (status === 0) {
      return 'Network error: the server could not be reached.';
    }
    return 'HTTP ' + status + ' with no error message.';
  }

  function showError(message) {
    ui.error.textContent = message;
    show(ui.error, !!message);
  }

  function setStatus(status) {
    ui.status.textContent = status;
    ui.status.className = 'status-' + status.replace(/[^a-z_]/g, '');
  }

  function setAnswer(text) {
    current.text = text;
    ui.answer.textContent = text;
  }

  function setBusy(busy) {
    ui.send.disabled = busy;
    show(ui.cancel, busy);
    ui.cancel.disabled = true; // enabled once the job exists
    ui.answer.setAttribute('aria-busy', busy ? 'true' : 'false');
  }

  function retryDelayMs(xhr, attempt) {
    var header = xhr ? parseFloat(xhr.getResponseHeader('Retry-After')) : NaN;
    if (header >= 0 && header < 60) {
      return Math.max(header * 1000, 500);
    }
    return Math.min(1000 * Math.pow(2, attempt), 15000);
  }

  function endTurn(turn, status, message) {
    if (turn !== current || !turn.active) {
      return;
    }
    turn.active = false;
    if (status) {
      turn.status = status;
      setStatus(status);
    }
    if (message) {
      turn.error = message;
      showError(message);
    }
    setBusy(false);
  }

  /* A failed job's error message lives on the job, not in its events. */
  function showJobError(turn) {
    request('GET', '/v1/jobs/' + encodeURIComponent(turn.jobId), turn.key, null,
      function (status, data) {
        if (turn === current && data && data.error && data.error.message) {
          turn.error = 'The job failed: ' + data.error.message;
          showError(turn.error);
        }
      });
  }

  function applyEvent(turn, event) {
    if (event.type === 'delta') {
      setAnswer(turn.text + (event.delta || ''));
    } else if (event.type === 'reset') {
      setAnswer('');
    } else if (event.type === 'status' && event.status) {
      turn.status = event.status;
      setStatus(event.status);
    } else if (event.type === 'end' && event.finish_reason) {
      ui.finish.textContent = ' (finish reason: ' + event.finish_reason + ')';
    }
  }

  function onEvents(turn, data) {
    var events = data.events || [];
    var i;
    for (i = 0; i < events.length; i += 1) {
      applyEvent(turn, events[i]);
    }
    if (data.done) {
      endTurn(turn, data.status, '');
      if (data.status === 'failed') {
        showJobError(turn);
      }
      return true;
    }
    if (data.status && data.status !== turn.status) {
      turn.status = data.status;
      setStatus(data.status);
    }
    return false;
  }

  /* One long-poll of a turn. A 200's body goes to onAnswer, which says whether the turn
     ended; if not, again(body, 0) polls on. A transient refusal is retried after a pause,
     again(null, attempt + 1); any other ends the turn. */
  function longPoll(turn, url, attempt, onAnswer, again) {
    request('GET', url, turn.key, null, function (status, data, xhr) {
      var delayMs;
      if (turn !== current || !turn.active) {
        return;
      }
      if (status === 200 && data) {
        if (attempt > 0) {
          showError('');
        }
        if (!onAnswer(data)) {
          again(data, 0);
        }
      } else if (TRANSIENT[status] && attempt < MAX_RETRIES) {
        delayMs = retryDelayMs(xhr, attempt);
        showError(errorText(status, data) + ' Retrying in ' + Math.round(delayMs / 1000) + ' s.');
        window.setTimeout(function () {
          again(null, attempt + 1);
        }, delayMs);
      } else {
        endTurn(turn, 'error', errorText(status, data));
      }
    });
  }

  function poll(turn, cursor, attempt) {
    var url = '/v1/jobs/' + encodeURIComponent(turn.jobId) + '/events?wait=' + WAIT_S;
    if (cursor) {
      url += '&cursor=' + encodeURIComponent(cursor);
    }
    longPoll(turn, url, attempt, function (data) {
      return onEvents(turn, data);
    }, function (data, next) {
      poll(turn, (data && data.cursor) || cursor, next);
    });
  }

  /* A Responses API turn: the object's own text, status and error. */
  function applyResponse(turn, data) {
    var details = data.incomplete_details;
    setAnswer(data.output_text || '');
    turn.status = data.status;
    setStatus(data.status);
    if (details && details.reason) {
      ui.finish.textContent = ' (' + details.reason + ')';
    }
    if (TERMINAL[data.status]) {
      endTurn(turn, data.status, data.error ? 'The response failed: ' + data.error.message : '');
      return true;
    }
    return false;
  }

  function pollResponse(turn, attempt) {
    var url = '/v1/responses/' + encodeURIComponent(turn.jobId) + '?wait=' + WAIT_S;
    longPoll(turn, url, attempt, function (data) {
      return applyResponse(turn, data);
    }, function (_data, next) {
      pollResponse(turn, next);
    });
  }

  function onSubmitted(turn, status, data) {
    if (turn !== current) {
      return;
    }
    if ((status !== 200 && status !== 202) || !data || !data.id) {
      endTurn(turn, 'error', errorText(status, data));
      return;
    }
    turn.jobId = data.id;
    turn.status = data.status || 'queued';
    ui.job.textContent = ' · ' + data.id;
    setStatus(turn.status);
    if (ui.prompt.value === turn.prompt) {
      ui.prompt.value = ''; // kept until now so that a failed submission can be retried
    }
    ui.cancel.disabled = false;
    if (turn.api === 'responses') {
      if (!applyResponse(turn, data)) {
        pollResponse(turn, 0);
      }
      return;
    }
    if (TERMINAL[data.status]) {
      // Answered at once (a cache hit): the job already holds the whole text.
      setAnswer(data.output_text || '');
      endTurn(turn, data.status, data.error ? 'The job failed: ' + data.error.message : '');
      return;
    }
    poll(turn, '', 0);
  }

  function archive(turn) {
    var item = document.createElement('li');
    var question = document.createElement('p');
    var answer = document.createElement('p');
    var meta = document.createElement('p');
    question.className = 'question';
    question.textContent = turn.prompt;
    answer.className = 'answer';
    answer.textContent = turn.text;
    meta.className = 'meta';
    meta.textContent = turn.status + ' · ' + turn.jobId + (turn.error ? ' · ' + turn.error : '');
    item.appendChild(question);
    if (turn.text) {
      item.appendChild(answer);
    }
    item.appendChild(meta);
    ui.log.appendChild(item);
    show(ui.logEmpty, false);
  }

  function startTurn(key, prompt, api) {
    if (current && current.jobId) {
      archive(current);
    }
    current = {
      prompt: prompt, key: key, jobId: '', text: '', status: '', error: '', active: true,
      api: api
    };
    showError('');
    ui.finish.textContent = '';
    ui.job.textContent = '';
    ui.question.textContent = prompt;
    show(ui.question, true);
    setAnswer('');
    setStatus('submitting');
    setBusy(true);
    return current;
  }

  function send() {
    var key = ui.key.value.replace(/^\s+|\s+$/g, '');
    var model = ui.model.value.replace(/^\s+|\s+$/g, '');
    var prompt = ui.prompt.value;
    var background = ui.background.checked;
    var body = background ? { input: prompt, background: true }
      : { messages: [{ role: 'user', content: prompt }] };
    var turn;
    if (current && current.active) {
      return;
    }
    if (!key) {
      showError('Enter an API key first.');
      ui.key.focus();
      return;
    }
    if (!prompt.replace(/\s+/g, '')) {
      showError('Write a prompt first.');
      ui.prompt.focus();
      return;
    }
    if (model) {
      body.model = model;
    }
    storageSet(KEY_ITEM, key);
    turn = startTurn(key, prompt, background ? 'responses' : 'jobs');
    request('POST', background ? '/v1/responses' : '/v1/jobs', key, body, function (status, data) {
      onSubmitted(turn, status, data);
    });
  }

  function cancel() {
    var turn = current;
    if (!turn || !turn.active || !turn.jobId) {
      return;
    }
    ui.cancel.disabled = true;
    // The polling loop sees the job (or response) end and reports it.
    request('POST', '/v1/' + turn.api + '/' + encodeURIComponent(turn.jobId) + '/cancel', turn.key,
      null,
      function (status, data) {
        if (status !== 200 && turn === current) {
          showError(errorText(status, data));
          ui.cancel.disabled = false;
        }
      });
  }

  function init() {
    var ids = ['chat', 'key', 'model', 'prompt', 'background', 'send', 'cancel', 'forget',
      'error', 'status', 'finish', 'job', 'question', 'answer', 'log', 'log-empty'];
    var i;
    for (i = 0; i < ids.length; i += 1) {
      ui[camel(ids[i])] = byId(ids[i]);
    }
    ui.key.value = storageGet(KEY_ITEM);
    ui.chat.addEventListener('submit', function (event) {
      event.preventDefault();
      send();
    }, false);
    ui.prompt.addEventListener('keydown', function (event) {
      if (event.keyCode === 13 && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        send();
      }
    }, false);
    ui.cancel.addEventListener('click', cancel, false);
    ui.forget.addEventListener('click', function () {
      storageSet(KEY_ITEM, '');
      ui.key.value = '';
      ui.key.focus();
    }, false);
    show(ui.cancel, false);
    show(ui.error, false);
    (ui.key.value ? ui.prompt : ui.key).focus();
  }

  init();
}());
