package cell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// The task endpoints (API.md, "Tasks"): POST /v1/tasks, GET /v1/tasks,
// GET /v1/tasks/{task}, POST /v1/tasks/{task}/cancel and
// POST /v1/tasks/{task}/resume. A daemon serves them; a foreground run's
// control socket does not.

func (s *Server) taskRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/tasks", s.submitTask)
	mux.HandleFunc("GET /v1/tasks", s.listTasks)
	mux.HandleFunc("GET /v1/tasks/{task}", s.getTask)
	mux.HandleFunc("POST /v1/tasks/{task}/cancel", s.cancelTask)
	mux.HandleFunc("POST /v1/tasks/{task}/resume", s.resumeTask)
}

// taskErrorCode maps a task endpoint's error to a status, as
// startErrorCode does a run's.
func taskErrorCode(err error) int {
	switch {
	case errors.Is(err, ErrModuleTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBadTask):
		return http.StatusBadRequest
	case errors.Is(err, ErrNoTask):
		return http.StatusNotFound
	case errors.Is(err, ErrTaskState):
		return http.StatusConflict
	}
	if s := startErrorCode(err); s != http.StatusInternalServerError {
		return s
	}
	if errors.Is(err, ErrShuttingDown) {
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// taskHint is the fix of a task endpoint's error, when one is known.
func taskHint(err error) string {
	switch {
	case errors.Is(err, ErrNoTask):
		return "GET /v1/tasks (agentrt tasks) lists the tasks"
	case errors.Is(err, ErrTaskState):
		return "GET /v1/tasks/TASK (agentrt task show TASK) says how the task stands"
	case errors.Is(err, ErrBadTask):
		return `send {"module": BASE64, "objective": "...", "retries": N, "backoff": "10s", "caps": {"steps": N}} (host/cell/API.md, Tasks)`
	}
	if h := Hint(err); h != "" {
		return h
	}
	return ""
}

func (s *Server) submitTask(w http.ResponseWriter, r *http.Request) {
	var sub TaskSubmission
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sub); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("task submission: over %d MiB: %w", MaxSubmission>>20, err), "")
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: %w", ErrBadTask, err), taskHint(ErrBadTask))
		return
	}
	tk, err := s.tasks.submit(r.Context(), sub)
	if err != nil {
		writeError(w, taskErrorCode(err), err, taskHint(err))
		return
	}
	writeJSON(w, http.StatusCreated, tk)
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	out, err := s.tasks.list(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err, "")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// findTask resolves the {task} path value, answering the error itself.
func (s *Server) findTask(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, err := s.tasks.find(r.PathValue("task"))
	if err != nil {
		writeError(w, taskErrorCode(err), err, taskHint(ErrNoTask))
		return "", false
	}
	return id, true
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	id, ok := s.findTask(w, r)
	if !ok {
		return
	}
	tk, err := s.tasks.show(r.Context(), id)
	if err != nil {
		writeError(w, taskErrorCode(err), err, taskHint(err))
		return
	}
	writeJSON(w, http.StatusOK, tk)
}

func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request) {
	s.taskAction(w, r, s.tasks.cancel)
}

func (s *Server) resumeTask(w http.ResponseWriter, r *http.Request) {
	s.taskAction(w, r, s.tasks.resume)
}

func (s *Server) taskAction(w http.ResponseWriter, r *http.Request, act func(context.Context, string) (*Task, error)) {
	if !noBody(w, r) {
		return
	}
	id, ok := s.findTask(w, r)
	if !ok {
		return
	}
	tk, err := act(r.Context(), id)
	if err != nil {
		writeError(w, taskErrorCode(err), err, taskHint(err))
		return
	}
	writeJSON(w, http.StatusOK, tk)
}

// SubmitTask creates a task on the cell and starts its first attempt.
func (c *Client) SubmitTask(ctx context.Context, sub TaskSubmission) (Task, error) {
	var t Task
	return t, c.call(ctx, http.MethodPost, "/v1/tasks", sub, &t)
}

// Tasks lists the cell's tasks, oldest first.
func (c *Client) Tasks(ctx context.Context) ([]Task, error) {
	var out []Task
	return out, c.call(ctx, http.MethodGet, "/v1/tasks", nil, &out)
}

// Task returns one task (an id, a unique prefix, or "last").
func (c *Client) Task(ctx context.Context, task string) (Task, error) {
	var t Task
	return t, c.call(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(task), nil, &t)
}

// CancelTask cancels a task: its pending retry and its current run.
func (c *Client) CancelTask(ctx context.Context, task string) (Task, error) {
	var t Task
	return t, c.call(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(task)+"/cancel", nil, &t)
}

// ResumeTask continues a cancelled task.
func (c *Client) ResumeTask(ctx context.Context, task string) (Task, error) {
	var t Task
	return t, c.call(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(task)+"/resume", nil, &t)
}
